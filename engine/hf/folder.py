"""A Hugging Face model's folder, read for import: a local folder or a hub id (downloaded when online), its
config.json and its weights (model.safetensors, or pytorch_model.bin read with ``weights_only``), each
missing or unreadable file refused in one line naming it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import TbuildError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


class UnsupportedImport(TbuildError):
    """The model has something tbuild does not (one line naming the config field and its value), or a file is
    missing or unreadable (one line naming the file)."""


def locate(source: str) -> Path:
    """The local folder ``source`` names, or the hub id ``source`` downloaded into the Hugging Face cache."""
    path = Path(source)
    if path.is_dir():
        return path
    if path.exists() or source.startswith((".", "/")) or source.count("/") > 1:
        raise UnsupportedImport(f"{source}: not a folder (give a Hugging Face model folder or a hub id)")
    try:
        from huggingface_hub import snapshot_download

        patterns = ["*.json", "*.safetensors", "*.bin", "*.spm", "*.model", "*.txt"]
        return Path(snapshot_download(source, allow_patterns=patterns))
    except Exception as e:  # noqa: BLE001 - offline, unknown id, gated: all one line
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UnsupportedImport(f"{source}: could not download it from the Hugging Face hub ({reason}); "
                                "offline, pass the model's local folder instead") from None


def read_json(path: Path) -> dict:
    """``path`` as a JSON object; missing, unreadable or another value: one line naming it."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UnsupportedImport(f"{path}: not readable JSON ({e})") from None
    if not isinstance(found, dict):
        raise UnsupportedImport(f"{path}: not a JSON object")
    return found


def read_config(folder: Path) -> dict:
    """config.json as a dict; missing or not JSON: one line naming it."""
    path = folder / "config.json"
    if not path.exists():
        raise UnsupportedImport(f"{path}: missing (a Hugging Face model folder has a config.json)")
    config = read_json(path)
    if "model_type" not in config:
        raise UnsupportedImport(f"{path}: no model_type (not a transformers config)")
    return config


def read_spm(path: Path):  # noqa: ANN201 - sentencepiece's generated ModelProto
    """The sentencepiece model at ``path`` as its ModelProto (refused in one line naming the file where it is
    not one)."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    try:
        proto.ParseFromString(path.read_bytes())
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and OSError: one line naming the file
        raise UnsupportedImport(f"{path}: not a sentencepiece model ({type(e).__name__})") from None
    if not proto.pieces:
        raise UnsupportedImport(f"{path}: not a sentencepiece model (no pieces)")
    return proto


def check_weights(folder: Path) -> Path:
    """The weights file the folder holds, opened once to prove it whole; missing or corrupt: one line naming it."""
    found = next((folder / n for n in WEIGHT_FILES if (folder / n).is_file()), None)
    if found is None:
        raise UnsupportedImport(f"{folder}: no weights (model.safetensors or pytorch_model.bin)")
    try:
        if found.name == "model.safetensors":
            from safetensors import safe_open

            with safe_open(str(found), "pt") as f:
                names = f.keys()
                for key in names:  # reads every tensor: a truncated file fails here
                    f.get_tensor(key)
        elif found.name == "pytorch_model.bin":
            import torch

            torch.load(found, map_location="cpu", weights_only=True)
        else:
            json.loads(found.read_text(encoding="utf-8"))
    except Exception as e:  # noqa: BLE001 - any reader's error means the same: the file is not whole
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UnsupportedImport(f"{found}: not readable ({reason})") from None
    return found


def load_model(folder: Path, class_name: str) -> PreTrainedModel:
    """The folder's model as ``class_name`` (float32, eval mode); a weight it lacks: one line naming it."""
    import transformers
    from transformers.utils import logging

    weights = check_weights(folder)
    logging.disable_progress_bar()
    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        model, info = getattr(transformers, class_name).from_pretrained(str(folder), output_loading_info=True,
                                                                        dtype="float32")
    except Exception as e:  # noqa: BLE001 - a file transformers cannot read
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UnsupportedImport(f"{weights}: {class_name} cannot load it ({reason})") from None
    finally:
        logging.set_verbosity(verbosity)
    missing = sorted(n for n in info["missing_keys"]  # position sinusoids and a headless class's unread pooler
                     if ".embed_positions." not in n and not n.startswith("pooler."))
    if missing or info["mismatched_keys"]:
        what = missing[0] if missing else sorted(info["mismatched_keys"])[0]
        raise UnsupportedImport(f"{weights}: lacks or misshapes {what} ({class_name})")
    return model.float().eval()
