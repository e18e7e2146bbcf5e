"""Dataset card text per source: description, licence and the BibTeX of the original papers."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import PurePath

from rudder.data.card import Card
from rudder.data.layout import RELATIONS_SCHEMA, VIDEOS_SCHEMA, expert_config
from rudder.labels import PAIR_LABELS

# An absolute path in an argument: the whole argument, after "--flag=", or after "@" (an
# expert's weights file, NAME=ARCH@/path/weights.pth).
_ABSOLUTE = re.compile(r"(^|=|@)(/.*)$")


def portable(arg: str) -> str:
    """``arg`` with an absolute path in it cut to its last component, for what a card and
    ``rudder.json`` record (a card goes to the Hub; folder and file names say what was
    built, and the SHA-256 of weights files is recorded beside them)."""
    return _ABSOLUTE.sub(lambda m: m.group(1) + (PurePath(m.group(2)).name or "/"), arg)


def recorded_command(argv) -> str:
    """The build command a card and ``rudder.json`` record, every argument :func:`portable`."""
    return "python -m datasets_scripts " + shlex.join(portable(arg) for arg in argv)


def local_paths(command: str) -> list[str]:
    """The absolute paths a recorded command holds (a folder built before commands were
    recorded without them)."""
    try:
        args = shlex.split(command)
    except ValueError:
        args = command.split()
    return [m.group(2) for arg in args if (m := _ABSOLUTE.search(arg))]


CE_BIBTEX = """@inproceedings{liu2019use,
  title     = {Use What You Have: Video Retrieval Using Representations From Collaborative Experts},
  author    = {Liu, Yang and Albanie, Samuel and Nagrani, Arsha and Zisserman, Andrew},
  booktitle = {British Machine Vision Conference (BMVC)},
  year      = {2019}
}"""


@dataclass(frozen=True)
class SourceInfo:
    pretty_name: str
    description: str
    license: str  # a Hub licence id
    licence_terms: str
    citation: str
    license_name: str = ""  # the Hub's id for the terms when license is "other"


SOURCES = {
    "rudder": SourceInfo(
        pretty_name="RUDDER",
        description=(
            "RUDDER (cRoss lingUal viDeo anD tExt Retrieval): toy-making videos with narrations "
            "and captions in Marathi, Hindi, Tamil, Telugu and English. Tamil and Telugu captions "
            "made with Google Translate are marked in the `machine_translated` column."
        ),
        license="other",
        license_name="rudder-research-terms",
        licence_terms="Distributed by the RUDDER authors for research; check their terms before "
        "redistributing.",
        citation="""@article{akula2021rudder,
  title   = {Rudder: A Cross Lingual Video and Text Retrieval Dataset},
  author  = {A, Jayaprakash and Abhishek and Dabral, Rishabh and Ramakrishnan, Ganesh and \
Jyothi, Preethi},
  journal = {arXiv preprint arXiv:2103.05457},
  year    = {2021}
}""",
    ),
    "charades_sta": SourceInfo(
        pretty_name="Charades-STA",
        description=(
            "Charades-STA: sentence-level temporal annotations of Charades videos of indoor "
            "activities. Each moment (`start`, `end` in seconds) with its sentence is one caption "
            "of its video."
        ),
        license="other",
        license_name="charades-sta-terms",
        licence_terms="Charades: non-commercial research use (Allen Institute for AI licence); "
        "Charades-STA annotations: see the TALL release.",
        citation="""@inproceedings{gao2017tall,
  title     = {TALL: Temporal Activity Localization via Language Query},
  author    = {Gao, Jiyang and Sun, Chen and Yang, Zhenheng and Nevatia, Ram},
  booktitle = {IEEE International Conference on Computer Vision (ICCV)},
  year      = {2017}
}
@inproceedings{sigurdsson2016hollywood,
  title     = {Hollywood in Homes: Crowdsourcing Data Collection for Activity Understanding},
  author    = {Sigurdsson, Gunnar A. and Varol, G{\\"u}l and Wang, Xiaolong and Farhadi, Ali \
and Laptev, Ivan and Gupta, Abhinav},
  booktitle = {European Conference on Computer Vision (ECCV)},
  year      = {2016}
}""",
    ),
    "didemo": SourceInfo(
        pretty_name="DiDeMo",
        description=(
            "DiDeMo (Distinct Describable Moments): Flickr videos cut into 5-second segments, "
            "with sentences describing moments. Splits follow the Collaborative Experts video "
            "lists (8,392 / 1,065 / 1,004)."
        ),
        license="bsd-2-clause",
        licence_terms="BSD 2-Clause (LocalizingMoments release); videos remain under their "
        "Flickr licences.",
        citation="""@inproceedings{hendricks2017localizing,
  title     = {Localizing Moments in Video with Natural Language},
  author    = {Hendricks, Lisa Anne and Wang, Oliver and Shechtman, Eli and Sivic, Josef and \
Darrell, Trevor and Russell, Bryan},
  booktitle = {IEEE International Conference on Computer Vision (ICCV)},
  year      = {2017}
}
"""
        + CE_BIBTEX,
    ),
    "msrvtt": SourceInfo(
        pretty_name="MSR-VTT",
        description=(
            "MSR-VTT: 10,000 web video clips with 20 English sentences each. Splits: full "
            "(6,513 / 497 / 2,990), 1k-A (JSFusion: 9,000 training videos, 1,000 test videos "
            "with one sentence each) or given video-id lists."
        ),
        license="other",
        license_name="msr-vtt-research-terms",
        licence_terms="Microsoft Research: research use only.",
        citation="""@inproceedings{xu2016msr,
  title     = {MSR-VTT: A Large Video Description Dataset for Bridging Video and Language},
  author    = {Xu, Jun and Mei, Tao and Yao, Ting and Rui, Yong},
  booktitle = {IEEE Conference on Computer Vision and Pattern Recognition (CVPR)},
  year      = {2016}
}
@inproceedings{yu2018joint,
  title     = {A Joint Sequence Fusion Model for Video Question Answering and Retrieval},
  author    = {Yu, Youngjae and Kim, Jongseok and Kim, Gunhee},
  booktitle = {European Conference on Computer Vision (ECCV)},
  year      = {2018}
}""",
    ),
    "videos": SourceInfo(
        pretty_name="Own videos",
        description=(
            "Videos from a local folder with their captions, and expert features extracted "
            "from them by `python -m datasets_scripts build videos` (the experts, their weights "
            "and sampling are listed below)."
        ),
        license="other",
        license_name="own-videos",
        licence_terms="The terms of the videos and captions, set by their owners.",
        citation=CE_BIBTEX,
    ),
}


def fields_section(
    captions_schema, experts: dict, has_relations: bool, text_features_dim: int | None = None
) -> str:
    """A Markdown list of every config's columns and Arrow types (the card's "features")."""

    def columns(schema):
        return ", ".join(f"`{f.name}` ({f.type})" for f in schema)

    lines = [
        "**Fields.**",
        "",
        f"- `captions`: {columns(captions_schema)}",
        f"- `videos`: {columns(VIDEOS_SCHEMA)}; `experts` lists the experts the video has",
    ]
    for name, info in sorted(experts.items()):
        shape = f"(n, {info.dim}) per video" if info.variable_length else f"({info.dim},)"
        lines.append(f"- `{expert_config(name)}`: `video_id` (string), `feature` (float32 {shape})")
    if text_features_dim:
        lines.append(
            "- `text_features`: `caption_id` (string), `feature` (float32 "
            f"(n, {text_features_dim}) per caption: token vectors)"
        )
    if has_relations:
        lines.append(f"- `relations`: {columns(RELATIONS_SCHEMA)}; labels {PAIR_LABELS}")
    return "\n".join(lines)


def make_card(source: str, how_built: str, fields: str = "") -> Card:
    """The card of a dataset built from ``source``; the licence terms go under "Licence"."""
    info = SOURCES[source]
    description = f"{info.description}\n\n{fields}" if fields else info.description
    return Card(
        info.pretty_name,
        description,
        info.license,
        info.citation,
        how_built,
        license_name=info.license_name,
        licence_terms=info.licence_terms,
    )
