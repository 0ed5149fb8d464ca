"""Figures per queue (rule 25): histograms, the worker's recorder, the figures a queue
reports, and their Prometheus exposition."""
