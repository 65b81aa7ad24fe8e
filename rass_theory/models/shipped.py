"""Reading a weights file shipped in ``rass_theory/models/data`` (or a user's own), safely."""
from __future__ import annotations

from importlib import resources

import torch

__all__ = ["load_weights_blob"]


def load_weights_blob(file_name: str, path=None, *, made_by: str):
    """The object saved in the shipped ``file_name`` (or in ``path``), loaded with ``weights_only=True``.

    Parameters
    ----------
    file_name : str
        Name of the file in ``rass_theory/models/data``.
    path : path-like, optional
        Another file to read instead.
    made_by : str
        The command that writes the file, named in the error when the shipped file is missing.

    Raises
    ------
    FileNotFoundError
        The shipped file is missing from the installation.
    """
    if path is not None:
        return torch.load(path, map_location="cpu", weights_only=True)
    ref = resources.files("rass_theory.models") / "data" / file_name
    if not ref.is_file():
        raise FileNotFoundError(f"the shipped weights {file_name} are missing from rass_theory/models/data; "
                                f"make them with {made_by}")
    with resources.as_file(ref) as p:
        return torch.load(p, map_location="cpu", weights_only=True)
