"""Catalog entries with real bytes, made offline at seed time, so a new hub has something to browse,
pull, load and mount before anything is mirrored.

* Datasets: four of the data sets scikit-learn ships inside its package (iris, breast cancer, wine,
  digits), each as CSV and Parquet with a README card. Iris and breast cancer go under their
  upstream Hugging Face ids (scikit-learn/iris, scikit-learn/breast-cancer-wisconsin), which the
  seed catalog lists; wine and digits have no upstream id and live under the local organisation
  `hub-samples`. The cards say plainly that the files were generated here from scikit-learn's copy,
  not copied from the upstream repo.
* Models: a tiny GPT-2 (causal LM) and a tiny BERT (encoder), with random weights drawn from a
  fixed seed, and tokenizers over bytes (GPT-2) or characters (BERT) that need no download.
  Weights are written as safetensors in the layout transformers expects, so
  `AutoModelForCausalLM.from_pretrained("hub-samples/tiny-gpt2")` works against the hub; they are
  made with numpy, so the server needs neither torch nor transformers.

Everything is deterministic: publishing again commits only files whose bytes changed (none, on the
same library versions). Run by `manage.py seed_catalog` (skip with --no-samples).
"""
from __future__ import annotations

import csv
import fnmatch
import hashlib
import io
import json
from collections.abc import Callable
from dataclasses import dataclass

from hub.accounts.actor import Actor
from hub.catalog import services
from hub.catalog.models import CatalogEntry
from hub.content import blobs
from hub.quotas import services as quotas
from hub.repos import services as repos
from hub.repos import trees
from hub.repos.models import Ref, Repo

SAMPLE_ORG = "hub-samples"
SEED = 20240601
TAG = "v1.0"
NOTE = ("These files were generated on this hub by `hub/catalog/samples.py` at seed time, offline. They are "
        "not a byte-for-byte copy of any upstream repository.")


@dataclass
class Sample:
    type: str
    repo_id: str
    entry: services.EntryData  # used when the repo has no catalog entry yet
    build: Callable[[], dict[str, bytes]]


def _lfs(path: str) -> bool:
    patterns = [line.split()[0] for line in repos.GITATTRIBUTES.decode().splitlines() if "filter=lfs" in line]
    return any(fnmatch.fnmatch(path.rsplit("/", 1)[-1], p) for p in patterns)


# --- datasets -------------------------------------------------------------------------------------

def _table(loader: str, label_names: bool) -> tuple[list[str], list[list], str]:
    from sklearn import datasets

    bunch = getattr(datasets, loader)()
    columns = [str(c) for c in bunch.feature_names] + ["target"]
    rows = []
    for x, y in zip(bunch.data.tolist(), bunch.target.tolist(), strict=True):
        row = [int(v) if float(v).is_integer() and loader == "load_digits" else float(v) for v in x] + [int(y)]
        rows.append(row)
    if label_names:
        columns.append("label")
        names = [str(n) for n in bunch.target_names]
        for row in rows:
            row.append(names[row[-1]])
    return columns, rows, bunch.DESCR


def _size_category(rows: int) -> str:
    """The Hub's size_categories tag for a number of rows."""
    for limit, tag in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if rows < limit:
            return tag
    return "n>1M"


def _csv(columns: list[str], rows: list[list]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return out.getvalue().encode()


def _parquet(columns: list[str], rows: list[list]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({c: [r[i] for r in rows] for i, c in enumerate(columns)})
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd")
    return out.getvalue()


def _dataset(loader: str, repo_id: str, title: str, stem: str, *, label_names: bool = True
             ) -> Callable[[], dict[str, bytes]]:
    def build() -> dict[str, bytes]:
        import sklearn

        columns, rows, descr = _table(loader, label_names)
        parquet = "data/train-00000-of-00001.parquet"
        card = f"""---
pretty_name: {title}
task_categories:
- tabular-classification
size_categories:
- {_size_category(len(rows))}
configs:
- config_name: default
  data_files:
  - split: train
    path: {parquet}
---
# {title}

{len(rows)} rows, {len(columns)} columns ({len(columns) - (2 if label_names else 1)} features, `target`{" and `label`" if label_names else ""}): the `{loader.removeprefix("load_")}` data set that scikit-learn
ships inside its package (`sklearn.datasets.{loader}()`, scikit-learn {sklearn.__version__}), as
`{stem}.csv` and as Parquet under `data/`. `target` is the class number{", `label` its name" if label_names else ""}.

{NOTE}

## Use it

```python
import pandas as pd
df = pd.read_parquet("hub://datasets/{repo_id}/{parquet}")
```

```python
from datasets import load_dataset   # with HF_ENDPOINT set to this hub
ds = load_dataset("{repo_id}", split="train")
```

## Description shipped with scikit-learn

```text
{descr.strip()}
```
"""
        return {"README.md": card.encode(), f"{stem}.csv": _csv(columns, rows), parquet: _parquet(columns, rows)}

    return build


# --- models ---------------------------------------------------------------------------------------

def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters (as in its tokenizer)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs, strict=True)}


def _safetensors(tensors: dict) -> bytes:
    from safetensors.numpy import save

    return save(dict(sorted(tensors.items())), metadata={"format": "pt"})


def _json(obj: dict) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()


def _tiny_gpt2() -> dict[str, bytes]:
    import numpy as np

    vocab = {ch: b for b, ch in _bytes_to_unicode().items()} | {"<|endoftext|>": 256}
    V, P, D, L = len(vocab), 128, 32, 2
    rng = np.random.default_rng(SEED)

    def normal(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    t = {"transformer.wte.weight": normal(V, D), "transformer.wpe.weight": normal(P, D),
         "transformer.ln_f.weight": np.ones(D, np.float32), "transformer.ln_f.bias": np.zeros(D, np.float32)}
    for i in range(L):
        p = f"transformer.h.{i}."
        t |= {p + "ln_1.weight": np.ones(D, np.float32), p + "ln_1.bias": np.zeros(D, np.float32),
              p + "attn.c_attn.weight": normal(D, 3 * D), p + "attn.c_attn.bias": np.zeros(3 * D, np.float32),
              p + "attn.c_proj.weight": normal(D, D), p + "attn.c_proj.bias": np.zeros(D, np.float32),
              p + "ln_2.weight": np.ones(D, np.float32), p + "ln_2.bias": np.zeros(D, np.float32),
              p + "mlp.c_fc.weight": normal(D, 4 * D), p + "mlp.c_fc.bias": np.zeros(4 * D, np.float32),
              p + "mlp.c_proj.weight": normal(4 * D, D), p + "mlp.c_proj.bias": np.zeros(D, np.float32)}
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V, "n_positions": P,
              "n_embd": D, "n_layer": L, "n_head": 2, "bos_token_id": 256, "eos_token_id": 256,
              "tie_word_embeddings": True, "torch_dtype": "float32"}
    card = f"""---
library_name: transformers
pipeline_tag: text-generation
tags:
- gpt2
- tiny
- random-weights
---
# tiny-gpt2

A GPT-2 causal language model with {L} layers, {D}-dimensional embeddings and {V} tokens (the 256
bytes and `<|endoftext|>`), with **random weights** drawn from a fixed seed. It generates noise: it is
here so that `from_pretrained`, `hub pull`, `hub://` and instance mounts can be tried on a fresh hub.

{NOTE}

```python
from transformers import AutoModelForCausalLM, AutoTokenizer   # with HF_ENDPOINT set to this hub
tok = AutoTokenizer.from_pretrained("{SAMPLE_ORG}/tiny-gpt2")
model = AutoModelForCausalLM.from_pretrained("{SAMPLE_ORG}/tiny-gpt2")
print(tok.decode(model.generate(**tok("Hello", return_tensors="pt"), max_new_tokens=8)[0]))
```
"""
    return {
        "README.md": card.encode(),
        "config.json": _json(config),
        "generation_config.json": _json({"bos_token_id": 256, "eos_token_id": 256, "pad_token_id": 256}),
        "model.safetensors": _safetensors(t),
        "vocab.json": _json(vocab),
        "merges.txt": b"#version: 0.2\n",
        "tokenizer_config.json": _json({"tokenizer_class": "GPT2Tokenizer", "model_max_length": P,
                                        "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                                        "unk_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                                        "add_prefix_space": False}),
        "special_tokens_map.json": _json({"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                                          "unk_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}),
    }


def _tiny_bert() -> dict[str, bytes]:
    import numpy as np

    chars = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [str(d) for d in range(10)] + list(".,;:!?'\"()-")
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars]
    V, P, D, L, FF = len(tokens), 128, 32, 2, 64
    rng = np.random.default_rng(SEED + 1)

    def normal(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def dense(prefix: str, out: int, inp: int) -> dict:
        return {prefix + ".weight": normal(out, inp), prefix + ".bias": np.zeros(out, np.float32)}

    def norm(prefix: str) -> dict:
        return {prefix + ".weight": np.ones(D, np.float32), prefix + ".bias": np.zeros(D, np.float32)}

    t = {"embeddings.word_embeddings.weight": normal(V, D), "embeddings.position_embeddings.weight": normal(P, D),
         "embeddings.token_type_embeddings.weight": normal(2, D)} | norm("embeddings.LayerNorm")
    for i in range(L):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            t |= dense(p + "attention.self." + name, D, D)
        t |= dense(p + "attention.output.dense", D, D) | norm(p + "attention.output.LayerNorm")
        t |= dense(p + "intermediate.dense", FF, D) | dense(p + "output.dense", D, FF) | norm(p + "output.LayerNorm")
    t |= dense("pooler.dense", D, D)
    config = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": V, "hidden_size": D,
              "num_hidden_layers": L, "num_attention_heads": 2, "intermediate_size": FF,
              "max_position_embeddings": P, "type_vocab_size": 2, "pad_token_id": 0, "torch_dtype": "float32"}
    card = f"""---
library_name: transformers
pipeline_tag: feature-extraction
tags:
- bert
- tiny
- random-weights
---
# tiny-bert

A BERT encoder with {L} layers, hidden size {D} and a {V}-token character vocabulary (letters,
digits, punctuation), with **random weights** drawn from a fixed seed: its embeddings mean nothing.
It is here so that loading an encoder can be tried on a fresh hub.

{NOTE}

```python
from transformers import AutoModel, AutoTokenizer   # with HF_ENDPOINT set to this hub
tok = AutoTokenizer.from_pretrained("{SAMPLE_ORG}/tiny-bert")
model = AutoModel.from_pretrained("{SAMPLE_ORG}/tiny-bert")
print(model(**tok("hello world", return_tensors="pt")).last_hidden_state.shape)
```
"""
    return {
        "README.md": card.encode(),
        "config.json": _json(config),
        "model.safetensors": _safetensors(t),
        "vocab.txt": ("\n".join(tokens) + "\n").encode(),
        "tokenizer_config.json": _json({"tokenizer_class": "BertTokenizer", "do_lower_case": True,
                                        "model_max_length": P}),
        "special_tokens_map.json": _json({"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]",
                                          "sep_token": "[SEP]", "mask_token": "[MASK]"}),
    }


def _local(title: str, summary: str, **kw) -> services.EntryData:
    return services.EntryData(title=title, summary=summary, source=CatalogEntry.SAMPLE, **kw)


SAMPLES = [
    Sample(Repo.DATASET, "scikit-learn/iris",
           _local("Iris", "Fisher's Iris data: 150 flowers, four measurements and the species. Generated here "
                  "from the copy scikit-learn ships.", tasks=["tabular-classification"], modality=["tabular"],
                  upstream_id="scikit-learn/iris"),
           _dataset("load_iris", "scikit-learn/iris", "Iris", "iris")),
    Sample(Repo.DATASET, "scikit-learn/breast-cancer-wisconsin",
           _local("Breast Cancer Wisconsin (Diagnostic)", "569 fine-needle aspirate samples with 30 numeric "
                  "features and a benign/malignant label. Generated here from the copy scikit-learn ships.",
                  tasks=["tabular-classification"], modality=["tabular"],
                  upstream_id="scikit-learn/breast-cancer-wisconsin"),
           _dataset("load_breast_cancer", "scikit-learn/breast-cancer-wisconsin",
                    "Breast Cancer Wisconsin (Diagnostic)", "breast_cancer")),
    Sample(Repo.DATASET, f"{SAMPLE_ORG}/wine",
           _local("Wine recognition", "Chemical analysis of 178 wines from three cultivars in one region of "
                  "Italy: 13 numeric features and the cultivar. Generated here from the copy scikit-learn "
                  "ships; it has no upstream repo.", tasks=["tabular-classification"], modality=["tabular"]),
           _dataset("load_wine", f"{SAMPLE_ORG}/wine", "Wine recognition", "wine")),
    Sample(Repo.DATASET, f"{SAMPLE_ORG}/digits",
           _local("Optical recognition of handwritten digits", "1,797 handwritten digits as 8×8 images of "
                  "pixel counts 0–16, one row per image with its digit. Generated here from the copy "
                  "scikit-learn ships; it has no upstream repo.", tasks=["image-classification"],
                  modality=["image", "tabular"]),
           _dataset("load_digits", f"{SAMPLE_ORG}/digits", "Optical recognition of handwritten digits",
                    "digits", label_names=False)),
    Sample(Repo.MODEL, f"{SAMPLE_ORG}/tiny-gpt2",
           _local("tiny-gpt2 (random weights)", "A two-layer GPT-2 causal language model over bytes with random "
                  "weights from a fixed seed, for trying from_pretrained, hub pull and mounts on a fresh hub.",
                  tasks=["text-generation"], modality=["text"], parameters="53K"),
           _tiny_gpt2),
    Sample(Repo.MODEL, f"{SAMPLE_ORG}/tiny-bert",
           _local("tiny-bert (random weights)", "A two-layer BERT encoder over characters with random weights "
                  "from a fixed seed, for trying AutoModel and tokenizers on a fresh hub.",
                  tasks=["feature-extraction"], modality=["text"], parameters="32K"),
           _tiny_bert),
]


# --- publishing -------------------------------------------------------------------------------------

def do_publish(sample: Sample, bot) -> str:
    """Makes the sample's repo hold exactly its files (one commit of whatever differs), tags the
    first such commit TAG, and gives it a catalog entry if it has none. Returns what it did."""
    from hub.catalog.seed import ensure_org

    ns_name, name = sample.repo_id.split("/")
    actor = Actor(bot)
    repo = Repo.objects.select_related("namespace").filter(type=sample.type, namespace__name=ns_name,
                                                           name=name).first()
    if repo is None:
        ns, _ = ensure_org(ns_name, bot)
        if ns is None:
            return f"skipped: the name {ns_name!r} belongs to a user"
        repo = repos.do_create_repo(actor, ns_name, name, sample.type, private=False)
    if not services.entry_of(repo):
        services.do_upsert_entry(repo, sample.entry)
    files = sample.build()
    head = repos.resolve_revision(repo, None, fetch=False)  # (its files are these, not upstream's)
    store = trees.NodeStore()
    changed = {}
    for path, data in files.items():
        entry = repos.entry_at(head, path, store)
        if entry is None or entry.ref != hashlib.sha256(data).hexdigest():
            changed[path] = data
    outcome = "unchanged"
    if changed:
        ops = repos.CommitOps(user=bot)
        with quotas.Hold() as hold:
            ops.reserve_inline(hold, repo.namespace, list(changed.values()))
            ops.store_inline([(p, d) for p, d in changed.items() if not _lfs(p)])
            large = blobs.ingest_many([d for p, d in changed.items() if _lfs(p)], bot)  # in parallel
            for path, data in sorted(changed.items()):
                if _lfs(path):
                    ops.add_file(path, large[hashlib.sha256(data).hexdigest()], lfs=True)
                else:
                    ops.add_inline(path, data)
            repos.do_commit(actor, repo, repo.default_branch, ops, title=f"Generate {len(changed)} sample files",
                            message="Made offline by hub/catalog/samples.py at seed time.")
        outcome = f"committed {len(changed)} files"
    if not Ref.objects.filter(repo=repo, kind=Ref.TAG, name=TAG).exists():
        repos.do_create_tag(actor, repo, TAG, None, message="the sample as first generated")
    return outcome


def do_publish_all(bot) -> list[tuple[str, str]]:
    return [(s.repo_id, do_publish(s, bot)) for s in SAMPLES]
