"""Sparse decoding: at a sampling rate well below the frame rate, decode only the frames
the sampled times show and the reference frames they depend on.

Which frame a time shows is :mod:`datasets_scripts.video_decode`'s rule: the last frame
whose timestamp is ``<= t`` (the first frame for earlier times). Dense decoding decodes
every frame up to the last sampled time; sparse decoding gives the same frames, pixel for
pixel, for less work, in two passes over the file:

1. **Plan**, by demuxing alone (no decoding, about 1% of a dense decode): every video
   packet's timestamp and keyframe flag. A packet is a frame with its presentation
   timestamp, so the frame each sampled time shows, a *needed* frame, is known. Decoding
   for a needed frame starts at the last keyframe before it in decode order whose time is
   not after it (a random-access point: decoding from there gives every frame from that
   time on as a decode from the file's start does; the file's first packet counts as one).
   A needed frame's *span* runs from that keyframe to the frame; overlapping or adjacent
   spans merge.
2. **Decode**: the packets are demuxed again. Packets outside every span are dropped
   undecoded (whole GOPs between samples, the end of a GOP after its last sample); inside
   a span the decoder skips non-reference frames other than the needed ones
   (``skip_frame = "NONREF"``: no frame depends on them). After each span the decoder is
   drained and reset, so the next span starts clean at its keyframe.

Only the needed frames come out, in time order; ``iter_frames`` picks each time's frame
from them as it does from every frame. Each needed frame is checked to come out in its
planned order, not flagged corrupt; on any surprise (a decoder that drops a frame, a
timestamp that differs from the plan, a demuxing error) the remaining frames are decoded
densely from the file's start, so the result is always the dense one.

Rule, per file (:func:`decoded_frames`, ``decoding="auto"``): sparse when the distinct
sampled times are fewer than :data:`SPARSE_SHARE` of the frames (first as the header states
them, then as the plan counts them) and the plan holds (every packet has a timestamp, no
two share one); else dense. What sparse saves depends on the GOP structure: at a sample
every second, a file with a keyframe every half second decodes about one GOP in two and
stops each at its sample; one with a keyframe every 8 s (x264's default) still decodes
every reference frame and saves only the non-reference B-frames
(``benchmarks/bench_extract.py`` measures several).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SPARSE_SHARE = 0.5  # sparse when the sampled times are fewer than half the frames
DECODINGS = ("auto", "dense", "sparse")


class _Mismatch(Exception):
    """The decoder did not give what the plan expects: decode densely instead."""


@dataclass(frozen=True)
class Plan:
    """What to decode: packets in decode order, numbered from 0."""

    pts: list  # every packet's presentation timestamp
    spans: list  # [(first, last)] packet indices to decode, ascending, disjoint
    needed: frozenset  # indices of the needed frames
    expected: list  # the needed frames' timestamps in time order


def decoded_frames(path, container, stream, times, origin: float, decoding: str = "auto"):
    """The frames ``iter_frames`` picks from: every frame of ``stream`` (dense), or the
    frames shown at ``times`` (ascending seconds from ``origin``; sparse). ``decoding``:
    ``"auto"`` (the module's rule), ``"dense"``, or ``"sparse"`` (whenever a plan holds)."""
    distinct = len(np.unique(np.asarray(times, dtype=np.float64)))
    if not distinct or decoding == "dense" or (
            decoding == "auto" and distinct >= SPARSE_SHARE * _header_frames(container, stream)):
        return container.decode(stream)
    plan = make_plan(path, times, origin)
    if plan is None or (decoding == "auto" and distinct >= SPARSE_SHARE * len(plan.pts)):
        return container.decode(stream)
    return _sparse(path, container, stream, plan, origin)


def _header_frames(container, stream) -> float:
    """The frame count the header states (or duration x average rate); inf if unknown."""
    if stream.frames:
        return float(stream.frames)
    rate = stream.average_rate or stream.guessed_rate
    if rate and container.duration:
        return float(container.duration / 1_000_000 * rate)
    return float("inf")


def make_plan(path, times, origin: float) -> Plan | None:
    """The plan for ``times`` (module docstring), from one demuxing pass; None when the file
    cannot be planned (a packet without a timestamp, two with the same, a demuxing error)."""
    import av

    pts, keys = [], []
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            base = stream.time_base
            for packet in container.demux(stream):
                if packet.size == 0:  # the end-of-stream marker
                    continue
                if packet.pts is None:
                    return None
                pts.append(packet.pts)
                keys.append(packet.is_keyframe)
    except (av.FFmpegError, OSError):
        return None
    if not pts or base is None:
        return None
    # exactly video_decode's float(pts * time_base) - origin: int / int rounds correctly
    seconds = np.array([p * base.numerator / base.denominator - origin for p in pts])
    order = np.argsort(seconds, kind="stable")
    ordered = seconds[order]
    if np.any(np.diff(ordered) == 0):
        return None
    shown = np.searchsorted(ordered, np.asarray(times, dtype=np.float64), side="right") - 1
    shown = np.maximum(shown, 0)
    # and the frame after the last one shown, which ends it as in a dense decode
    shown = np.append(shown, min(int(shown.max()) + 1, len(order) - 1))
    needed = sorted({int(order[k]) for k in shown})
    marks = np.where(np.asarray(keys, dtype=bool), np.arange(len(pts)), 0)
    gop_start = np.maximum.accumulate(marks)  # the last keyframe at or before each packet
    reaches = []
    for index in needed:
        start = int(gop_start[index])
        while start > 0 and seconds[start] > seconds[index]:  # a frame that leads its GOP
            start = int(gop_start[start - 1])
        reaches.append((start, index))
    spans: list = []
    for start, end in sorted(reaches):  # the union of the reaches, as disjoint spans
        if spans and start <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    expected = [pts[i] for i in sorted(needed, key=lambda i: seconds[i])]
    return Plan(pts=pts, spans=spans, needed=frozenset(needed), expected=expected)


def _sparse(path, container, stream, plan: Plan, origin: float):
    """Yield the needed frames in time order (module docstring); on a surprise, every frame
    after the last one yielded, decoded densely."""
    last = None
    try:
        for frame in _planned(container, stream, plan):
            last = frame.pts
            yield frame
    except _Mismatch:
        yield from _dense_after(path, None if last is None else _seconds(last, stream, origin),
                                origin)


def _planned(container, stream, plan: Plan):
    codec = stream.codec_context
    needed_pts = set(plan.expected)
    out_after_span = _needed_per_span(plan)
    done, span, index = 0, 0, -1  # needed frames out; the span being decoded; packet number
    first, end = plan.spans[0]

    def take(frames):
        """The needed frames among ``frames``, checked against the plan's order."""
        nonlocal done
        for frame in frames:
            if done < len(plan.expected) and frame.pts == plan.expected[done]:
                if frame.is_corrupt:
                    raise _Mismatch
                done += 1
                if frame.time_base is None:  # a drained frame has no packet to take it from
                    frame.time_base = stream.time_base
                yield frame
            elif frame.pts in needed_pts:  # out of order: one before it did not come out
                raise _Mismatch

    try:
        for packet in container.demux(stream):
            if packet.size == 0:
                continue
            index += 1
            if index >= len(plan.pts) or packet.pts != plan.pts[index]:
                raise _Mismatch
            if index < first:
                continue
            codec.skip_frame = "DEFAULT" if index in plan.needed else "NONREF"
            yield from take(codec.decode(packet))
            if index == end:
                yield from take(codec.decode(None))  # drain, then reset for the next span
                codec.flush_buffers()
                if done != out_after_span[span]:
                    raise _Mismatch  # a needed frame did not come out
                span += 1
                if span == len(plan.spans):
                    return
                first, end = plan.spans[span]
    except _Mismatch:
        raise
    except Exception:  # noqa: BLE001 - a demuxing or decoding error: the dense path decides
        raise _Mismatch from None
    raise _Mismatch  # the packets ended before the plan's


def _needed_per_span(plan: Plan) -> list[int]:
    """How many needed frames are out once each span is drained."""
    ends = np.array([end for _, end in plan.spans])
    return np.cumsum(np.bincount(np.searchsorted(ends, sorted(plan.needed)),
                                 minlength=len(ends))).tolist()


def _seconds(pts: int, stream, origin: float) -> float:
    return float(pts * stream.time_base) - origin


def _dense_after(path, after: float | None, origin: float):
    """Every frame of ``path`` whose time is past ``after``, decoding from the start."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for frame in container.decode(stream):
            if frame.pts is None or frame.time_base is None:
                continue
            if after is None or float(frame.pts * frame.time_base) - origin > after:
                yield frame
