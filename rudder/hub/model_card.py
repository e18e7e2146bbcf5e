"""The files of a published model (:mod:`rudder.hub.published_models`'s layout) made from a
training run:
the selected checkpoint's tensors as safetensors, its config, experts and text side, the
run's metrics and environment, and the model card.

The card is a Hub model card: YAML front matter (``library_name: rudder``, licence,
languages, Hub dataset ids, ``model-index`` results with split and protocol, and a
``rudder:`` block with the dataset fingerprint, experts, text side, loss and parameters,
training commit) and a body with the commands, results and citations.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from rudder.atomic import atomic_write_text, replacing
from rudder.config import dump_yaml, from_dict
from rudder.errors import RunError
from rudder.hub import published_models
from rudder.metric_names import RECALL_KS
from rudder.runs.layout import (
    checkpoint_file,
    env_file,
    is_single_run,
    metrics_file,
    read_json,
    write_json,
)

PROTOCOL = (
    "rudder.evaluation.inference.split_metrics on the test split: every caption in the model's "
    "caption languages queries all test videos (text-to-video), every test video with a caption "
    "queries all test captions (video-to-text, a video ranked by its best caption); tie-averaged "
    "ranks as Collaborative Experts' cols2metrics (break_ties=averaging); R@K (percent) counts "
    "ranks below K, R@1 an untied first place; MdR/MnR in ranks; nDCG and mAP (percent) over "
    "noun/verb relevance (EPIC-KITCHENS-100 MIR) where the dataset has classes"
)

RUDDER_BIB = """@article{akula2021rudder,
  title   = {Cross Lingual Video and Text Retrieval: A New Benchmark Dataset and
             Algorithm (Rudder)},
  author  = {A, Jayaprakash and Abhishek and Dabral, Rishabh and Ramakrishnan, Ganesh
             and Jyothi, Preethi},
  journal = {arXiv:2103.05457 (ICMI 2021)},
  year    = {2021}
}"""
CE_BIB = """@inproceedings{liu2019use,
  title     = {Use What You Have: Video Retrieval Using Representations From Collaborative Experts},
  author    = {Liu, Yang and Albanie, Samuel and Nagrani, Arsha and Zisserman, Andrew},
  booktitle = {BMVC},
  year      = {2019}
}"""
# The paper of each loss (its module's "Source:"); the partial-order loss is RUDDER's own.
LOSS_PAPERS = {
    "mm": None,  # Collaborative Experts' max-margin ranking loss
    "triplet": "Schroff, Kalenichenko, Philbin. FaceNet: A Unified Embedding for Face "
               "Recognition and Clustering. CVPR 2015",
    "hn": "Faghri, Fleet, Kiros, Fidler. VSE++: Improving Visual-Semantic Embeddings with "
          "Hard Negatives. BMVC 2018",
    "dw": "Wu, Manmatha, Smola, Krähenbühl. Sampling Matters in Deep Embedding Learning. "
          "ICCV 2017",
    "ot": "Xu, Sun, Liu. Learning with Batch-wise Optimal Transport Loss for 3D Shape "
          "Recognition. CVPR 2019",
    "po": None,  # RUDDER's partial-order loss
    "ran": "Falcon, Serra, Lanz. Learning Video Retrieval Models with Relevance-Aware Online "
           "Mining. ICIAP 2022",
    "ranp": "Falcon, Serra, Lanz. Learning Video Retrieval Models with Relevance-Aware Online "
            "Mining. ICIAP 2022",
    "relevance_margin": "Falcon, Sudhakaran, Serra, Escalera, Lanz. Relevance-based Margin for "
                        "Contrastively-trained Video Retrieval Models. ICMR 2022",
    "mimm_adaptive": "Lin et al. Egocentric Video-Language Pretraining. NeurIPS 2022",
    "sms": "Wang, Wang, Chau. Symmetric Multi-Similarity Loss for EPIC-KITCHENS-100 "
           "Multi-Instance Retrieval Challenge 2024. arXiv:2406.12256",
    "hn_exclusion": "Galanopoulos, Mezaris. Hard-negatives or Non-negatives? A Hard-negative "
                    "Selection Strategy for Cross-modal Retrieval Using the Improved Marginal "
                    "Ranking Loss. ICCV Workshops 2021",
}


def selected_checkpoint(run_dir: Path) -> tuple[Path, dict, dict]:
    """The run's ``best.pt`` (the checkpoint its metrics.json describes), its state and the
    metrics; a RunError for a seeds group, an unfinished run or metrics of another epoch."""
    from rudder.runs.checkpoints import load_checkpoint

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunError(f"{run_dir} is not a run directory")
    if not is_single_run(run_dir):
        raise RunError(f"{run_dir} is not one training run (no checkpoints/ folder); publish "
                       "one seed's run of a --seeds group, e.g. {run_dir}/seed-0")
    checkpoint = checkpoint_file(run_dir, "best")
    if not checkpoint.is_file() or not metrics_file(run_dir).is_file():
        raise RunError(f"{run_dir} has no finished training (checkpoints/best.pt and "
                       "metrics.json are written when it ends); finish or resume it first")
    state = load_checkpoint(checkpoint)
    metrics = read_json(metrics_file(run_dir))
    if metrics.get("best_epoch") != state.get("epoch"):
        raise RunError(f"{metrics_file(run_dir)} describes epoch {metrics.get('best_epoch')} "
                       f"but {checkpoint} holds epoch {state.get('epoch')}; evaluate the run "
                       "again or let it finish")
    return checkpoint, state, metrics


def stage(run_dir, out: Path, repo_id: str, license: str | None = None) -> list[str]:
    """Write the published files of ``run_dir``'s selected checkpoint into ``out``;
    returns their names."""
    import torch
    from safetensors.torch import save_file

    run_dir, out = Path(run_dir), Path(out)
    _, state, metrics = selected_checkpoint(run_dir)
    config = from_dict(state["config"])
    env = read_json(env_file(run_dir)) if env_file(run_dir).is_file() else {}
    text_side = {
        "caption_langs": list(config.data.caption_langs),
        "max_words": config.data.max_words,
        "text_encoder": published_models.text_encoder_identity(config.data.text_encoder,
                                                  config.model.text_input_dim),
        "sentence_transforms": published_models.sentence_transforms(config.data),
        "vocabulary": state["vocab"],
    }
    fingerprint = str(state["fingerprint"])
    manifest = {
        "format_version": published_models.FORMAT_VERSION,
        "experts": state["experts"],
        "checkpoint": {"epoch": state["epoch"], "fingerprint": fingerprint,
                       "selection": metrics.get("selection")},
        "dataset": {"spec": config.data.dataset, **_dataset_facts(config.data.dataset),
                    "fingerprint": env.get("dataset_fingerprint") or fingerprint.split("-")[0]},
        "training_commit": env.get("git_sha"),
        "run": run_dir.name,
    }
    licence = license or manifest["dataset"].get("license")
    if licence == "other" and not license:  # the Hub names an "other" licence by license_name
        licence = {"license": "other", "license_name": manifest["dataset"].get("license_name")}
    if not licence:
        raise RunError(f"cannot tell the licence: the training dataset {config.data.dataset!r} "
                       "is not here to read its card; pass --license (e.g. mit, cc-by-4.0)")
    tensors = {name: tensor.detach().contiguous().clone()
               for name, tensor in state["model"].items() if isinstance(tensor, torch.Tensor)}
    with replacing(out / published_models.WEIGHTS) as tmp:
        save_file(tensors, str(tmp), metadata={"format": "pt", "rudder_format": "1",
                                               "fingerprint": fingerprint})
        tmp.chmod(0o644)  # safetensors writes 0600; the others are readable like any file
    atomic_write_text(out / published_models.CONFIG, dump_yaml(state["config"]))
    write_json(out / published_models.MANIFEST, manifest)
    write_json(out / published_models.TEXT_SIDE, text_side)
    write_json(out / published_models.METRICS, metrics)
    write_json(out / published_models.ENV, env)
    atomic_write_text(out / published_models.CARD,
                      card(repo_id, config, manifest, text_side, metrics, licence))
    return list(published_models.MODEL_FILES)


def _dataset_facts(spec: str) -> dict:
    """Name, version, languages and licence of the training dataset where it is on this
    machine (``sample`` or a folder); else (a Hub dataset id, a folder not here) nothing."""
    from rudder.data.layout import DatasetFolder, LayoutError

    try:
        if spec == "sample":
            from rudder.data.sample import sample_dataset_path

            root = sample_dataset_path()
        elif Path(spec).expanduser().is_dir():
            root = Path(spec).expanduser()
        else:
            return {}
        meta = DatasetFolder(root).meta
    except (LayoutError, OSError):
        return {}
    facts = {"name": meta.name, "version": meta.version, "languages": meta.languages}
    readme = root / "README.md"
    if readme.is_file():
        front = card_front_matter(readme.read_text(encoding="utf-8"))
        facts.update({key: front[key] for key in ("license", "license_name") if front.get(key)})
    return facts


def card_front_matter(text: str) -> dict:
    """The YAML front matter of a card's text (``{}`` without one); a RunError when it does
    not parse."""
    if not text.startswith("---\n") or "\n---\n" not in text[4:]:
        return {}
    try:
        front = yaml.safe_load(text[4:text.index("\n---\n", 4)])
    except yaml.YAMLError as error:
        raise RunError(f"the card's YAML front matter does not parse ({error})") from None
    return front if isinstance(front, dict) else {}


def _is_hub_dataset(spec: str) -> bool:
    return spec.count("/") == 1 and not spec.startswith((".", "/", "~")) and not Path(
        spec).exists() and bool(published_models.REPO_ID.match(spec))


def front_matter(repo_id, config, manifest, text_side, metrics, licence) -> dict:
    """The card's YAML metadata."""
    dataset = manifest["dataset"]
    front = {
        "library_name": "rudder",
        **({key: value for key, value in licence.items() if value}
           if isinstance(licence, dict) else {"license": licence}),
        "language": list(config.data.caption_langs),
        "tags": ["rudder", "video-retrieval", "text-video-retrieval", "collaborative-experts",
                 "multilingual", f"loss-{config.loss.name}"],
    }
    if _is_hub_dataset(dataset["spec"]):
        front["datasets"] = [dataset["spec"]]
    results = []
    test = metrics.get("test") or {}
    for direction, task in (("t2v", "Text-to-video retrieval"),
                            ("v2t", "Video-to-text retrieval")):
        values = test.get(direction) or {}
        entries = [{"type": f"recall_at_{k}", "name": f"{direction} R@{k}",
                    "value": round(values[f"R{k}"], 4)} for k in RECALL_KS if f"R{k}" in values]
        entries += [{"type": key.lower(), "name": f"{direction} {key}", "value": round(value, 4)}
                    for key in ("MdR", "MnR", "nDCG", "mAP")
                    if isinstance(value := values.get(key), (int, float))]
        if entries:
            results.append({
                "task": {"type": "text-video-retrieval", "name": task},
                "dataset": {"name": dataset.get("name") or dataset["spec"],
                            "type": dataset["spec"], "split": "test",
                            "args": {"fingerprint": dataset["fingerprint"]}},
                "metrics": entries,
            })
    if results:
        front["model-index"] = [{"name": repo_id.split("/")[-1], "results": results}]
    encoder = text_side["text_encoder"]
    front["rudder"] = {
        "format_version": published_models.FORMAT_VERSION,
        "dataset": {key: dataset[key] for key in ("spec", "name", "version", "fingerprint")
                    if dataset.get(key) is not None},
        "experts": {name: dict(info) for name, info in sorted(manifest["experts"].items())},
        "text_side": {
            "caption_langs": list(config.data.caption_langs),
            "vocabulary_size": len(text_side["vocabulary"]["tokens"]),
            "subwords": text_side["vocabulary"].get("subwords"),
            "text_encoder": encoder,
            "sentence_transforms": text_side.get("sentence_transforms"),
        },
        "loss": {"name": config.loss.name, "params": dict(config.loss.params)},
        "selection": config.selection,
        "epoch": manifest["checkpoint"]["epoch"],
        "training_commit": manifest["training_commit"],
        "protocol": PROTOCOL,
    }
    return front


def card(repo_id, config, manifest, text_side, metrics, licence) -> str:
    """README.md of the model repository."""
    front = front_matter(repo_id, config, manifest, text_side, metrics, licence)
    meta = front["rudder"]
    test = metrics.get("test") or {}
    rows = []
    for direction in ("t2v", "v2t"):
        values = test.get(direction) or {}
        cells = [values.get(k) for k in ("R1", "R5", "R10", "MdR", "MnR", "nDCG", "mAP")]
        rows.append(f"| {direction} | " + " | ".join(
            "-" if v is None else f"{v:.2f}" for v in cells) + " |")
    loss_paper = LOSS_PAPERS.get(config.loss.name)
    citations = [RUDDER_BIB, CE_BIB]
    params = json.dumps(meta["loss"]["params"], sort_keys=True) or "{}"
    encoder = meta["text_side"]["text_encoder"]
    text = "word embeddings over the vocabulary in text_side.json" + (
        f" with character n-grams ({meta['text_side']['subwords']})"
        if meta["text_side"]["subwords"] else "")
    if encoder:
        text = (f"frozen text encoder {encoder['id']!r} ({encoder['kind']}"
                + (f", files sha256 {encoder['sha256'][:16]}" if encoder.get("sha256") else "")
                + ")")
    transforms = meta["text_side"].get("sentence_transforms")
    if transforms:
        text += "; sentence transforms " + ", ".join(
            f"{key}={value}" for key, value in transforms.items())
    body = f"""
# {repo_id}

A Collaborative Experts text-video retrieval model trained with rudder on
`{meta['dataset'].get('name', meta['dataset']['spec'])}`
(fingerprint `{meta['dataset']['fingerprint']}`), captions in
{', '.join(front['language'])}.

## Use

```bash
python -m rudder.evaluate hf://{repo_id} --dataset DATASET
python -m app --checkpoint hf://{repo_id} --dataset DATASET
```

Pin a revision with `hf://{repo_id}@REVISION`. The dataset must have the experts
{', '.join(sorted(meta['experts']))} with the dimensions listed in the metadata, and
captions in at least one of {', '.join(front['language'])}.

## Training

- loss: `{config.loss.name}`, parameters `{params}`
- selection: `{config.selection}` on `{config.data.val_split}`, epoch {meta['epoch']}
- text side: {text}
- training commit: `{meta['training_commit']}`; the full config is `config.yaml`, the
  environment `env.json`

## Results (test split)

| direction | R@1 | R@5 | R@10 | MdR | MnR | nDCG | mAP |
|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

Protocol: {PROTOCOL}.

## Licence

{front.get('license_name') or front['license']}; the terms of the training data apply too.

## Citation

The RUDDER dataset and partial-order loss, and Collaborative Experts (the model{
    " and max-margin loss" if config.loss.name == "mm" else ""}){
    f"; the `{config.loss.name}` loss: {loss_paper}" if loss_paper else ""}.

```bibtex
{chr(10).join(citations)}
```
"""
    header = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{header}---\n{body}"
