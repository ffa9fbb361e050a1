"""Loaders on the real shared data files, and the pooled corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_complexity_agents.errors import CorpusError, InputError
from rag_complexity_agents.eval.datasets import (
    DATASET_FILES,
    build_pooled_corpus,
    default_data_dir,
    is_paragraph_id,
    load_records,
    paragraph_id,
    parse_record,
    resolve_dataset,
)

DATA = default_data_dir()
needs_data = pytest.mark.skipif(
    not (DATA / DATASET_FILES["musique"]).is_file(), reason=f"shared data not found in {DATA}"
)

EXPECTED_COUNTS = {
    "musique": 134,
    "musique_qa": 500,
    "2wikimultihopqa": 500,
    "hotpotqa": 239,
    "hotpotqa_fullwiki": 500,
    "squad": 480,
    "nq_open": 500,
    "triviaqa": 200,
    "bamboogle": 125,
    "compositional_celebrities": 1000,
}


@needs_data
@pytest.mark.parametrize("name", sorted(DATASET_FILES))
def test_every_file_loads_into_the_common_record(name: str) -> None:
    records = load_records(resolve_dataset(name, DATA))
    assert len(records) == EXPECTED_COUNTS[name]
    assert len({r.id for r in records}) == len(records)
    for record in records:
        assert (
            record.question and record.answers and all(isinstance(a, str) for a in record.answers)
        )
        assert record.answer == record.answers[0]
        if record.paragraphs is not None:
            assert all(is_paragraph_id(p.id) for p in record.paragraphs)
            supporting = {p.id for p in record.paragraphs if p.is_supporting}
            assert set(record.supporting_ids) == supporting


@needs_data
def test_musique_with_paragraphs() -> None:
    records = load_records(resolve_dataset("musique", DATA))
    first = records[0]
    assert first.id == "2hop__574419_270105" and first.dataset == "musique"
    assert first.hops == 2 and first.qtype == "2hop"
    assert first.paragraphs is not None and len(first.paragraphs) == 20
    assert first.decomposition is not None and len(first.decomposition) == 2
    # each gold step points at one of the supporting paragraphs
    for step in first.decomposition:
        assert step.support_id in first.supporting_ids
    assert first.decomposition[0].answers == ("Mountrail County",)
    assert {r.hops for r in records} == {2, 3, 4}
    with_aliases = [r for r in records if len(r.answers) > 1]
    assert len(with_aliases) == 36  # SOURCES.md: answer_aliases kept


@needs_data
def test_musique_qa_names_gold_titles_without_paragraphs() -> None:
    first = load_records(resolve_dataset("musique_qa", DATA), limit=1)[0]
    assert first.paragraphs is None and first.supporting_ids == ()
    assert first.supporting_titles == ("Green (Steve Hillage album)", "Miquette Giraudy")
    assert first.has_retrieval_gold


@needs_data
def test_2wiki_hotpot_squad_and_open_domain_files() -> None:
    wiki = load_records(resolve_dataset("2wiki", DATA), limit=1)[0]
    assert wiki.dataset == "2wikimultihopqa" and wiki.qtype == "bridge_comparison"
    assert wiki.hops is None and len(wiki.supporting_titles) == 4
    assert wiki.paragraphs is not None and len(wiki.paragraphs) == 10
    assert wiki.extra["supporting_facts"][0] == ["El extraño viaje", 0]

    fullwiki = load_records(resolve_dataset("hotpotqa_fullwiki", DATA), limit=1)[0]
    # gold titles come from supporting_facts even when the context lacks the paragraph
    assert len(fullwiki.supporting_titles) == 2 and len(fullwiki.supporting_ids) == 1

    squad = load_records(resolve_dataset("squad", DATA), limit=1)[0]
    assert squad.paragraphs is not None and len(squad.supporting_ids) == 1

    nq = load_records(resolve_dataset("nq", DATA), limit=1)[0]
    assert nq.answers == ("14 December 1972 UTC", "December 1972") and nq.paragraphs is None

    cc = load_records(resolve_dataset("cc", DATA))
    numeric = [r for r in cc if r.answer.lstrip("-").isdigit()]
    assert numeric and numeric[0].answers == (numeric[0].answer,)  # int answers become str
    assert cc[0].hops == 2 and cc[0].qtype == "birthdate_uspresident"


@needs_data
def test_offset_and_limit() -> None:
    path = resolve_dataset("bamboogle", DATA)
    window = load_records(path, offset=10, limit=5)
    assert [r.id for r in window] == [f"bamboogle_{i}" for i in range(10, 15)]
    assert load_records(path, offset=124, limit=10)[0].id == "bamboogle_124"
    with pytest.raises(InputError):
        load_records(path, offset=-1)


@needs_data
def test_pooled_corpus_deduplicates_and_keeps_gold_ids() -> None:
    records = load_records(resolve_dataset("musique", DATA)) + load_records(
        resolve_dataset("2wiki", DATA)
    )
    pooled = build_pooled_corpus(records)
    ids = [doc.id for doc in pooled.documents]
    assert len(ids) == len(set(ids)) == len(pooled)
    assert pooled.raw_paragraphs == 134 * 20 + 500 * 10
    assert len(pooled) < pooled.raw_paragraphs  # questions share paragraphs
    known = set(ids)
    for record in records:
        assert set(record.supporting_ids) <= known
    doc = pooled.documents[0]
    assert doc.metadata["paragraph_id"] == doc.id
    assert doc.text.startswith(doc.title + "\n")
    assert build_pooled_corpus(records).fingerprint == pooled.fingerprint


def test_pooling_merges_equal_paragraphs_across_datasets() -> None:
    shared = {"idx": 0, "title": "Emma", "text": "Emma is a novel.", "is_supporting": True}
    one = parse_record(
        {"id": "a", "dataset": "x", "question": "q?", "answer": "1", "paragraphs": [shared]}
    )
    other = parse_record(
        {
            "id": "b",
            "dataset": "y",
            "question": "q?",
            "answer": "2",
            "paragraphs": [
                {**shared, "idx": 3, "text": " Emma is a novel. ", "is_supporting": False},
                {"idx": 4, "title": "Emma", "text": "Another text.", "is_supporting": True},
            ],
        }
    )
    pooled = build_pooled_corpus([one, other], title_in_text=False)
    assert len(pooled) == 2 and pooled.raw_paragraphs == 3
    assert pooled.documents[0].id == paragraph_id("Emma", "Emma is a novel.")
    assert pooled.documents[0].metadata["datasets"] == "x,y"
    assert pooled.documents[0].text == "Emma is a novel."
    assert one.supporting_ids == (pooled.documents[0].id,)
    assert other.supporting_ids == (pooled.documents[1].id,)


def test_bad_records_and_names(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no question"):
        parse_record({"id": "a", "answer": "x"})
    with pytest.raises(CorpusError, match="no gold answer"):
        parse_record({"id": "a", "question": "q?", "answers": []})
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a", "question": "q?", "answer": "x"}\n{oops\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"broken\.jsonl:2"):
        load_records(broken)
    twice = tmp_path / "twice.jsonl"
    line = json.dumps({"id": "a", "question": "q?", "answer": "x"})
    twice.write_text(f"{line}\n{line}\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="occurs twice"):
        load_records(twice)
    with pytest.raises(CorpusError, match="known dataset name"):
        resolve_dataset("no-such-dataset", tmp_path)
    with pytest.raises(CorpusError, match="--data DIR"):
        resolve_dataset("musique", tmp_path)
    assert resolve_dataset(twice) == twice
