"""GRADE (Lee et al.): hops × retrieval-difficulty matrix and difficulty-controlled multi-hop
question generation from a knowledge graph. See :mod:`.difficulty`, :mod:`.matrix`,
:mod:`.kg` and :mod:`.generate`."""
