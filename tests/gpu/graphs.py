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
