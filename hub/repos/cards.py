"""README cards: the YAML front matter ("metadata") and what upstream checks of it.

huggingface_hub sends a commit's README.md to POST /api/validate-yaml before it uploads anything,
raises on errors ("Invalid metadata in README.md") and shows warnings (a card without metadata).
The same check refuses a commit whose README.md has invalid metadata, so a card that the catalog
and the clients read (model-index → evaluation results, configs → dataset splits) is never broken.

What is checked is the shape of the fields the hub and the clients interpret — the ones
huggingface_hub's ModelCardData/DatasetCardData and `datasets` parse — not their values: an unknown
license or tag is the owner's business, a `model-index` that is not a list breaks every reader."""
from __future__ import annotations

from typing import Any

import yaml

EMPTY_WARNING = ("Empty or missing yaml metadata in repo card: add a YAML block between '---' lines at the "
                 "top of README.md (license, tags, datasets, …) so the card can be found and read by tools")


def split_card(text: str) -> tuple[dict, str]:
    """README card → (YAML front matter as a dict, markdown body). Bad YAML gives an empty dict."""
    meta, body, _ = _parse(text)
    return (meta if isinstance(meta, dict) else {}), body


def _parse(text: str) -> tuple[Any, str, str | None]:
    """(front matter, body, YAML error or None); front matter None when the card has none."""
    text = text.lstrip("\ufeff").lstrip()  # (blank lines before the front matter are allowed, as upstream)
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end != -1:
            body = text[end + 4:].lstrip("\n")
            try:
                return yaml.safe_load(text[3:end]), body, None
            except yaml.YAMLError as err:
                return None, body, str(err)
    return None, text, None


def check_card(text: str, repo_type: str = "model") -> tuple[list[str], list[str]]:
    """(errors, warnings) of a README card's metadata."""
    meta, _, yaml_error = _parse(text)
    if yaml_error is not None:
        return [f"Invalid YAML in the README front matter: {yaml_error}"], []
    if meta is None or meta == {}:
        return [], [EMPTY_WARNING]
    if not isinstance(meta, dict):
        return ["The README front matter must be a YAML mapping (key: value lines)"], []
    errors: list[str] = []
    for key, kind in _STRINGS_OR_LISTS.items():
        if key in meta and not _str_or_list(meta[key]):
            errors.append(f'"{key}" must be {kind}')
    for key in ("pipeline_tag", "library_name", "pretty_name", "license_name", "license_link", "thumbnail"):
        if key in meta and meta[key] is not None and not isinstance(meta[key], str):
            errors.append(f'"{key}" must be a string')
    if "model-index" in meta:
        errors += _check_model_index(meta["model-index"])
    if "configs" in meta:
        errors += _check_configs(meta["configs"])
    if "widget" in meta and not isinstance(meta["widget"], list | dict):
        errors.append('"widget" must be a list of examples')
    if "inference" in meta and not isinstance(meta["inference"], bool | dict):
        errors.append('"inference" must be true, false or a mapping of parameters')
    if "extra_gated_fields" in meta and not isinstance(meta["extra_gated_fields"], dict):
        errors.append('"extra_gated_fields" must be a mapping of field name to type')
    return errors, []


_STRINGS_OR_LISTS = {
    "license": "a license id or a list of them",
    "language": "a language code or a list of them",
    "tags": "a tag or a list of tags",
    "datasets": "a dataset id or a list of them",
    "metrics": "a metric id or a list of them",
    "base_model": "a model id or a list of them",
    "task_categories": "a task or a list of tasks",
    "task_ids": "a task id or a list of them",
    "size_categories": "a size category or a list of them",
    "multilinguality": "a value or a list of values",
    "annotations_creators": "a value or a list of values",
    "language_creators": "a value or a list of values",
    "source_datasets": "a value or a list of values",
}


def _str_or_list(value: Any) -> bool:
    return value is None or isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(v, str | int | float) for v in value))


def _check_model_index(index: Any) -> list[str]:
    """model-index: [{name, results: [{task: {type}, dataset: {type, name}, metrics: [{type, value}]}]}]"""
    if not isinstance(index, list):
        return ['"model-index" must be a list of models, each with a name and its results '
                "(see https://huggingface.co/docs/hub/model-cards#evaluation-results)"]
    errors = []
    for i, model in enumerate(index):
        where = f'"model-index[{i}]"'
        if not isinstance(model, dict):
            errors.append(f"{where} must be a mapping with \"name\" and \"results\"")
            continue
        if not isinstance(model.get("name"), str):
            errors.append(f'{where}.name must be a string')
        results = model.get("results")
        if not isinstance(results, list):
            errors.append(f"{where}.results must be a list")
            continue
        for j, result in enumerate(results):
            at = f"{where}.results[{j}]"
            if not isinstance(result, dict):
                errors.append(f"{at} must be a mapping with task, dataset and metrics")
                continue
            task = result.get("task")
            if not isinstance(task, dict) or not isinstance(task.get("type"), str):
                errors.append(f"{at}.task must be a mapping with a \"type\" (e.g. text-classification)")
            dataset = result.get("dataset")
            if not isinstance(dataset, dict) or not isinstance(dataset.get("type"), str) \
                    or not isinstance(dataset.get("name"), str):
                errors.append(f"{at}.dataset must be a mapping with a \"type\" (its id) and a \"name\"")
            metrics = result.get("metrics")
            if not isinstance(metrics, list) or not all(
                    isinstance(m, dict) and isinstance(m.get("type"), str) and "value" in m for m in metrics):
                errors.append(f"{at}.metrics must be a list of mappings, each with a \"type\" and a \"value\"")
    return errors


def _check_configs(configs: Any) -> list[str]:
    """configs (dataset cards): [{config_name, data_files: str | [str] | [{split, path}]}]"""
    if not isinstance(configs, list):
        return ['"configs" must be a list of configurations, each with a "config_name"']
    errors = []
    for i, config in enumerate(configs):
        where = f'"configs[{i}]"'
        if not isinstance(config, dict) or not isinstance(config.get("config_name"), str):
            errors.append(f'{where} must be a mapping with a "config_name"')
            continue
        files = config.get("data_files")
        if files is None or isinstance(files, str):
            continue
        if not isinstance(files, list) or not all(
                isinstance(f, str) or (isinstance(f, dict) and isinstance(f.get("split"), str)
                                       and _str_or_list(f.get("path")) and f.get("path") is not None)
                for f in files):
            errors.append(f'{where}.data_files must be a path pattern, a list of them, or a list of '
                          '{split, path} mappings')
    return errors
