"""CUDA graph capture as the GPU tests do it: warm up on a side stream, then capture."""

from __future__ import annotations

import torch


def capture(model: torch.nn.Module, static: torch.Tensor, warmup: int = 2) -> tuple[torch.cuda.CUDAGraph, object]:
    """Captures ``model(static)``; returns the graph and its static output."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):  # as torch.cuda.graph's docs advise
            model(static)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model(static)
    return graph, out


def replay_save_under_budget(folder: str, numel: int, budget: int, replays: int) -> int:
    """Captures ``acl_save(x + 0, folder/b.pt)`` of a float32 vector of
    ``numel`` elements, then replays it ``replays`` times with ``x`` filled
    with the replay index and no synchronisation in between, under a writer
    budget of ``budget`` bytes (restored after). Returns the peak bytes in
    flight; the files are b_0.pt, b_1.pt, ..."""
    import os

    import graphprobe
    from graphprobe.saving import DEFAULT_WRITE_BUDGET, set_write_budget, writer_stats

    x = torch.zeros(numel, device="cuda")
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graphprobe.acl_save(x + 0, os.path.join(folder, "b.pt"))
    set_write_budget(budget)
    try:
        writer_stats(reset_peak=True)
        for i in range(replays):
            x.fill_(float(i))
            graph.replay()
        graphprobe.flush()
        return writer_stats()["peak_bytes_in_flight"]
    finally:
        set_write_budget(DEFAULT_WRITE_BUDGET)
