"""GPU memory as vLLM sees it: named cards with the total CUDA reports for them, and ``--gpu-memory``'s reading.

vLLM sizes everything from the total ``torch.accelerator.get_memory_info`` returns (vLLM 0.33.0
``utils/mem_utils.py`` L143), of which it requests ``gpu_memory_utilization`` (``v1/worker/utils.py``
L724-726). That total is a little less than the size a card is sold as, and less than ``nvidia-smi``'s
``memory.total``: an "80 GB" H100 shows 81559 MiB in ``nvidia-smi`` and 79.19 GiB at vLLM's start-up
("Free memory on device (…/79.19 GiB) on startup"), not the 74.5 GiB that 80 x 10^9 bytes would be.

The figures below are the totals vLLM's start-up line prints on each card (two decimals of GiB, as the
line has them), read from published vLLM logs; ``nvidia-smi`` shows the sizes named in each comment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eaglehub.errors import UsageError

GIB = 2**30
GB = 10**9


@dataclass(frozen=True)
class Card:
    name: str
    title: str
    sold_gb: tuple[int, ...]
    """The sizes the card is sold as ("80 GB"): a bare ``--gpu-memory 80`` means this card."""
    cuda_gib: float

    @property
    def cuda_bytes(self) -> int:
        return round(self.cuda_gib * GIB)


CARDS = (
    Card("h100", "NVIDIA H100 80GB", (80,), 79.19),  # nvidia-smi 81559 MiB (H800 the same)
    Card("h200", "NVIDIA H200", (141,), 139.81),  # nvidia-smi 143771 MiB
    Card("b200", "NVIDIA B200", (180, 192), 178.35),  # nvidia-smi 183359 MiB
    # the GPU of a GB200 NVL72 tray (4 GPUs a node), sold as 186 GB: nvidia-smi 189471 MiB
    Card("gb200", "NVIDIA GB200", (186,), 184.31),
)


@dataclass(frozen=True)
class GpuMemory:
    """``total_bytes`` per GPU as vLLM sees it, the card it was read as (or None) and how it was read."""

    total_bytes: int
    card: str | None
    read_as: str


def card(name: str) -> Card | None:
    key = re.sub(r"^nvidia[\s_-]*", "", name.strip().lower())
    key = re.sub(r"[\s_-]*(\d+\s*gb)?$", "", key) or key
    return next((c for c in CARDS if c.name == key), None)


def read_gpu_memory(text: str) -> GpuMemory:
    """``--gpu-memory``: a card's name (``H100``, ``h200``, ``GB200``), or a size. A size that names a card as
    it is sold (``80``, ``80GB``, ``80 GB``, ``141GB``, ...: 80, 141, 180, 192, 186) means that card's CUDA total,
    whatever the unit: "80 GB" on a spec sheet is the card, not 80 x 10^9 bytes (74.5 GiB, less than an H100
    holds). Only a size that names no card is taken literally: ``GiB`` (or no unit) as 2^30 bytes, ``GB`` as
    10^9 bytes; ``read_as`` says which reading was made.

    Raises:
        UsageError: none of those (exit 2).
    """
    text = str(text).strip()
    named = card(text)
    if named is not None:
        return GpuMemory(named.cuda_bytes, named.name, f"{named.title}: {named.cuda_gib:g} GiB as CUDA reports it")
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(gib|gb)?", text.lower())
    if not m or float(m.group(1)) <= 0:
        names = ", ".join(c.name for c in CARDS)
        raise UsageError(
            f"--gpu-memory {text}: not a card ({names}), a size a card is sold as (80, 80GB) or a size in GiB",
            hint="e.g. --gpu-memory H100, --gpu-memory 141 (an H200) or --gpu-memory 79.19GiB",
        )
    value, unit = float(m.group(1)), m.group(2)
    sold = next((c for c in CARDS if value in c.sold_gb), None) if unit != "gib" else None
    if sold is not None:
        return GpuMemory(
            sold.cuda_bytes,
            sold.name,
            f"{text}: the size an {sold.title} is sold as, read as that card: {sold.cuda_gib:g} GiB as CUDA reports it",
        )
    if unit == "gb":
        return GpuMemory(round(value * GB), None, f"{value:g} x 10^9 bytes, as given (a size that names no card)")
    return GpuMemory(round(value * GIB), None, f"{value:g} GiB, as given (a size that names no card)")
