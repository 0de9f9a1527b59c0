"""Retrieval benchmarks: quality (nDCG@10, Recall@100, MRR@10) and speed, through the real HTTP APIs.

Benchmarks never gate CI; `benchmarks/tests` holds a small smoke run of each so they keep working.
"""
