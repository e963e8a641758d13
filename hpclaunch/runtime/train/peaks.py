"""Dense bf16 (fp16 where the device has no bf16) peak TFLOP/s per device, for MFU when the profile's
partition gives no `peak_tflops` (a local GPU, say). Vendor datasheet figures, without sparsity.

The first entry whose pattern is in the device's name wins, so the specific names come first
("H100 PCIe" before "H100"). Unknown devices give None: the metrics then carry no MFU.
"""

from __future__ import annotations

PEAK_TFLOPS: tuple[tuple[str, float], ...] = (
    ("GB200", 2500.0),
    ("GH200", 989.0),
    ("B200", 2250.0),
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),  # SXM5, e.g. "NVIDIA H100 80GB HBM3"
    ("H200", 989.0),
    ("H800", 989.0),
    ("H20", 148.0),
    ("L40S", 362.0),
    ("L40", 181.0),
    ("A100", 312.0),
    ("A800", 312.0),
    ("A10G", 70.0),
    ("A10", 125.0),
    ("L4", 121.0),
    ("RTX 4090", 165.0),
    ("V100", 125.0),  # fp16 tensor cores (no bf16)
    ("MI300X", 1307.0),
    ("MI250X", 383.0),
)


def peak_tflops(device_name: str) -> float | None:
    """The table's peak for a device name as the runtime reports it, e.g. torch.cuda.get_device_name()."""
    for pattern, peak in PEAK_TFLOPS:
        if pattern in device_name:
            return peak
    return None
