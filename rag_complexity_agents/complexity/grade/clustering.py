"""Stage 4 of GRADE's generation: soft clusters of claims, the scope of entity equivalence.

*Deviation:* claim embeddings are reduced by PCA before the Gaussian mixture (few claims,
384 dimensions).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .records import Claim

if TYPE_CHECKING:
    from ...config import GradeConfig
    from ...models.embeddings import SentenceTransformerEmbedder


def cluster_claims(
    claims: Sequence[Claim], embedder: SentenceTransformerEmbedder, grade: GradeConfig
) -> list[list[Claim]]:
    """Soft clusters of claims: a GaussianMixture over PCA-reduced claim embeddings; each
    claim joins every cluster whose posterior is at least ``grade.cluster_membership``."""
    n = len(claims)
    k = max(1, math.ceil(n / grade.claims_per_cluster))
    if n < 2 or k == 1:
        return [list(claims)] if claims else []
    from sklearn.decomposition import PCA
    from sklearn.mixture import GaussianMixture

    vectors = embedder.encode([c.text for c in claims])
    dims = max(1, min(16, n - 1, vectors.shape[1]))
    reduced = PCA(n_components=dims, random_state=grade.seed).fit_transform(vectors)
    gmm = GaussianMixture(
        n_components=k, covariance_type="diag", reg_covar=1e-3, random_state=grade.seed
    ).fit(reduced)
    posterior = gmm.predict_proba(reduced)
    groups: list[list[Claim]] = []
    for j in range(k):
        members = [
            c
            for c, row in zip(claims, posterior, strict=True)
            if row[j] >= grade.cluster_membership
        ]
        if members:
            groups.append(members)
    return groups
