"""Where and how a command computes: the device and precision policy, the CPU's bf16 probe, process-wide settings
(threads, denormals, heap) applied by entry points.
"""
