"""The evaluation harness: datasets, strategies, resumable runs, metrics and reports.

* :mod:`.datasets` — loaders for the shared JSONL schema (:class:`~.datasets.QARecord`) and
  the pooled, deduplicated retrieval corpus;
* :mod:`.strategies` — the :class:`~.strategies.Strategy` protocol and the registry by name;
* :mod:`.ceilings` — gold-evidence and gold-decomposition ceilings; :mod:`.peers` — LlamaIndex's
  SubQuestionQueryEngine and LangGraph's create_react_agent on our model and retrieval;
* :mod:`.cache` — the on-disk LLM call cache every strategy's chat model goes through;
* :mod:`.runner` — crash-safe, resumable JSONL run files; :mod:`.harness` — Config → run;
* :mod:`.metrics` — cover-EM, EM, F1, Acc, evidence recall@k, nDCG@10, paired bootstrap;
* :mod:`.report` — comparison tables (markdown + JSON) across runs.

Nothing heavy is imported here; import the submodules you need.
"""
