"""Evaluation of the analyses against labelled corpora (``labels.json``): ``proxydiag bench``."""
