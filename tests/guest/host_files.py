"""A host's meminfo and cpuinfo of a test's own, for $HCU_HOST_PROC (where hcu reads the host's)."""

from __future__ import annotations

from pathlib import Path

INTEL_FLAGS = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov vmx ept"


def host_proc(folder: Path, *, flags: str = INTEL_FLAGS, total_kib: int = 8 << 20,
              available_kib: int = 6 << 20) -> Path:
    """A folder with a meminfo and a cpuinfo (two CPUs) in the kernel's formats."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "meminfo").write_text(f"MemTotal:       {total_kib} kB\nMemFree:        {available_kib // 2} kB\n"
                                    f"MemAvailable:   {available_kib} kB\nBuffers:          1024 kB\n")
    cpu = "processor\t: {n}\nvendor_id\t: GenuineIntel\nmodel name\t: Test CPU\nflags\t\t: {flags}\n\n"
    (folder / "cpuinfo").write_text("".join(cpu.format(n=n, flags=flags) for n in range(2)))
    return folder
