"""Writes the notebooks of this folder (stored without outputs). Run from the repo root:

    .venv/bin/python notebooks/make_notebooks.py

Every notebook runs offline on the packaged models. ``RCA_DEMO_HOME`` may point to a
collection home that already holds the demo collection (the tests pass a copy); otherwise
the notebook indexes the demo corpus into a temporary directory.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent

SETUP = """\
import os, shutil, tempfile
from pathlib import Path
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
import torch
torch.set_num_threads(1)  # small models on a shared CPU: one thread is faster

from rag_complexity_agents.config import Config
from rag_complexity_agents.corpus.demo import DEMO_CORPUS
from rag_complexity_agents.corpus.documents import iter_documents
from rag_complexity_agents.corpus.store import CorpusStore

home = Path(os.environ.get("RCA_DEMO_HOME") or tempfile.mkdtemp(prefix="rca-notebook-"))
config = Config(
    corpus={"home": home},
    collection="demo",
    graph={"k": 16},
    models={"chat": "llamacpp:smollm2-135m", "n_threads": 1},  # the tiny packaged model
)
store = CorpusStore.open_or_create("demo", config)
if len(store) == 0:
    store.ingest(iter_documents(DEMO_CORPUS), progress=False)  # embeddings, BM25, graph
print(f"collection {store.name!r}: {len(store)} chunks in {home}")
"""


def notebook(cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in cells]
    for i, cell in enumerate(nb.cells):  # stable ids: regenerating changes only what changed
        cell.id = f"cell-{i:02d}"
    return nb


QUICKSTART = [
    (
        "md",
        "# Quickstart: index, ask, read the trace\n\n"
        "Indexes the bundled demo corpus, answers a multi-hop question with Self-Ask + SUNAR "
        "(NAR + ASU) + MER, and walks through the trace. The tiny SmolLM2-135M keeps it fast; "
        "use `llamacpp:qwen2.5-0.5b` (the default `auto`) or `ollama:<model>` for better answers.",
    ),
    ("code", SETUP),
    ("md", "## First-stage and neighbourhood-aware retrieval"),
    (
        "code",
        """\
from rag_complexity_agents.components import Components

parts = Components(config.with_overrides({"retrieval.first_stage_k": 20, "nar.c": 12, "nar.b": 4}))
nar = parts.sunar_retriever(with_asu=False)
for doc in nar.retrieve("Where was the director of Spirited Away born?", 5):
    print(f"{doc.score:.3f} {doc.source:11s} {doc.chunk.title:25s} via={doc.via}")
""",
    ),
    ("md", "## Ask: Self-Ask + SUNAR + MER as a LangGraph graph"),
    (
        "code",
        """\
from rag_complexity_agents.agents.registry import build_pipeline
from rag_complexity_agents.agents.run import run_graph

graph = build_pipeline("self_ask_sunar_mer", config)
result = run_graph(
    graph,
    "Who directed Spirited Away?",
    options={"max_steps": 1, "b": 2, "c": 2, "m": 2},  # small knobs: seconds, not minutes
)
print("answer:", result.answer)
""",
    ),
    ("md", "## Read the trace"),
    (
        "code",
        """\
trace = result.trace
print("stop reason:", trace["stop_reason"], "| LLM calls:", trace["llm_calls"],
      "| ASU samples:", trace["asu_samples"])
for step in trace["steps"]:
    print("sub-question:", step.get("sub_question"), "->", step.get("answer"))
    for rnd in (step.get("retrieval") or {}).get("rounds", []):
        for batch in rnd["batches"]:
            print("   NAR batch", batch.get("index"), "s =", batch.get("s"), batch.get("cluster_answers"))
for doc in trace["evidence"]:
    print(f"evidence: {doc['title']:25s} {doc['source']:11s} via={doc.get('via')}")
print("MER:", (trace["mer"] or {}).get("answer"))
""",
    ),
]

LANGCHAIN = [
    (
        "md",
        "# LangChain app\n\nOur retriever in a classic LCEL RAG chain, a whole loop graph as "
        "a runnable and as a tool, and your own LangChain vector store as SUNAR's first stage.",
    ),
    ("code", SETUP),
    (
        "code",
        """\
from rag_complexity_agents.integrations.langchain import SunarLangChainRetriever

retriever = SunarLangChainRetriever(config=config, strategy="nar", k=3)
docs = retriever.invoke("Where was the director of Spirited Away born?")
for d in docs:
    print(d.id, d.metadata["title"], d.metadata["provenance"], round(d.metadata["score"], 3))
print(len(retriever.invoke("Studio Ghibli", k=1)), "document with k=1 per call")
""",
    ),
    ("md", "## A RAG chain (LCEL) with the packaged chat model"),
    (
        "code",
        """\
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from rag_complexity_agents.models.chat import load_chat_model

chat = load_chat_model(config.models.chat, config.models.model_copy(update={"max_tokens": 24}), config.models.home)
prompt = ChatPromptTemplate.from_messages([
    ("system", "Answer the question in a few words using the passages."),
    ("human", "Passages:\\n{context}\\n\\nQuestion: {question}"),
])
def passages(docs):
    return "\\n".join(d.page_content[:300] for d in docs)

rag = {"context": retriever | passages, "question": RunnablePassthrough()} | prompt | chat | StrOutputParser()
print(rag.invoke("Who directed Spirited Away?"))
""",
    ),
    ("md", "## A loop graph as a runnable and as a tool"),
    (
        "code",
        """\
from rag_complexity_agents.integrations.langchain import as_runnable, as_tool

answer_chain = as_runnable("single_step", config, output="answer")  # an LCEL Runnable
print(answer_chain.name, "->", answer_chain.invoke("Who founded Studio Ghibli?"))

tool = as_tool("single_step", config)
print(tool.name, "|", tool.description[:60], "...")
# an agent calls it as {"type": "tool_call", "name": tool.name, "args": {"question": ...}};
# the ToolMessage content is the answer and its artifact the trace
""",
    ),
    ("md", "## Bring your own vector store"),
    (
        "code",
        """\
import json
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore
from rag_complexity_agents.integrations.byo_langchain import from_langchain
from rag_complexity_agents.integrations.langchain import RCAEmbeddings

rows = [json.loads(line) for line in DEMO_CORPUS.read_text().splitlines()][:40]
vectorstore = InMemoryVectorStore(RCAEmbeddings())
vectorstore.add_documents([Document(page_content=r["text"], metadata={"title": r["title"]}) for r in rows])

parts = from_langchain(vectorstore, config=config)  # graph from the store's own vectors
byo = SunarLangChainRetriever(components=parts, strategy="nar", k=3)
for d in byo.invoke("Who directed The Shape of Water?"):
    print(d.metadata["title"], d.metadata["provenance"])
""",
    ),
]

LLAMAINDEX = [
    (
        "md",
        "# LlamaIndex app\n\nOur retriever inside LlamaIndex's `RetrieverQueryEngine` (with the "
        "packaged chat model as a LlamaIndex LLM), a loop graph as a query engine and a tool, "
        "and a `VectorStoreIndex` as SUNAR's first stage.",
    ),
    ("code", SETUP),
    (
        "code",
        """\
from llama_index.core import Settings
from rag_complexity_agents.integrations.llamaindex import RCAEmbedding, RCAQueryEngine, SunarLlamaIndexRetriever
from rag_complexity_agents.integrations.llamaindex_llm import LangChainChatLLM

Settings.llm = LangChainChatLLM(config=config, max_tokens=24)  # nothing reaches OpenAI
Settings.embed_model = RCAEmbedding()

retriever = SunarLlamaIndexRetriever.from_defaults(config, k=3, strategy="nar")
for n in retriever.retrieve("Where was the director of Spirited Away born?"):
    print(n.node.node_id, n.node.metadata["title"], n.node.metadata["provenance"], round(n.score, 3))
""",
    ),
    (
        "code",
        """\
from llama_index.core.query_engine import RetrieverQueryEngine

engine = RetrieverQueryEngine.from_args(retriever, llm=Settings.llm)
response = engine.query("Who directed Spirited Away?")
print(response, [n.node.metadata["title"] for n in response.source_nodes])
""",
    ),
    ("md", "## A loop graph as a query engine and a tool"),
    (
        "code",
        """\
from llama_index.core.tools import QueryEngineTool

graph_engine = RCAQueryEngine.from_defaults("single_step", config)
response = graph_engine.query("Who founded Studio Ghibli?")
print(response.response, "| loop:", response.metadata["trace"]["loop"])
tool = QueryEngineTool.from_defaults(graph_engine, name="complex_qa",
                                     description="Answers multi-hop questions.")
print(tool.metadata.name, tool.metadata.description)
""",
    ),
    ("md", "## Bring your own index"),
    (
        "code",
        """\
import json
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import TextNode
from rag_complexity_agents.integrations.byo_llamaindex import from_llamaindex

rows = [json.loads(line) for line in DEMO_CORPUS.read_text().splitlines()][:40]
index = VectorStoreIndex([TextNode(id_=r["id"], text=r["text"], metadata={"title": r["title"]}) for r in rows])
parts = from_llamaindex(index, config=config)
byo = SunarLlamaIndexRetriever.from_defaults(components=parts, k=3, strategy="nar")
for n in byo.retrieve("Who directed The Shape of Water?"):
    print(n.node.node_id, n.node.metadata["title"], n.node.metadata["provenance"])
""",
    ),
]

BENCHMARKS = [
    (
        "md",
        "# Benchmarks and plots\n\nLoads the committed results in `benchmarks/results/*.json` "
        "and plots them (no model runs here).",
    ),
    (
        "code",
        """\
import json
from pathlib import Path
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

root = Path.cwd()
while not (root / "benchmarks" / "results").is_dir() and root != root.parent:
    root = root.parent
results = {p.stem: json.loads(p.read_text()) for p in sorted((root / "benchmarks" / "results").glob("*.json"))}
print(sorted(results))
""",
    ),
    ("md", "## Retrieval: recall@10 per strategy and dataset"),
    (
        "code",
        """\
rows = (results.get("retrieval") or {}).get("rows", [])
if rows:
    keys = sorted({(r["strategy"], r.get("pool"), r.get("queries")) for r in rows})
    datasets = sorted({r["dataset"] for r in rows})
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / max(1, len(keys))
    for i, key in enumerate(keys):
        values = [next((r["recall_at_10"] for r in rows if r["dataset"] == d and
                        (r["strategy"], r.get("pool"), r.get("queries")) == key), 0) for d in datasets]
        ax.bar([x + i * width for x in range(len(datasets))], values, width, label="/".join(map(str, key)))
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(datasets))], datasets)
    ax.set_ylabel("recall@10"); ax.legend(fontsize=6, ncol=2); fig.tight_layout()
    print(len(rows), "rows plotted")
""",
    ),
    ("md", "## Index build: graph time and embedding throughput"),
    (
        "code",
        """\
build = (results.get("index_build") or {}).get("rows", [])
if build:
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([r["n_chunks"] for r in build], [r["graph_seconds"] for r in build], marker="o")
    ax.set_xscale("log"); ax.set_yscale("log")
    ax.set_xlabel("chunks"); ax.set_ylabel("graph build (s)"); fig.tight_layout()
    for r in build:
        print(r["n_chunks"], "chunks:", r["graph_seconds"], "s,", r.get("graph_gflops"), "GFLOP/s")
""",
    ),
    ("md", "## End to end: accuracy against cost per strategy"),
    (
        "code",
        """\
e2e = (results.get("end_to_end") or {}).get("rows", [])
if e2e:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, dataset in zip(axes, sorted({r["dataset"] for r in e2e})):
        for r in (r for r in e2e if r["dataset"] == dataset):
            lo, hi = r["cover_em_ci95"]
            ax.errorbar(r["llm_calls"], r["cover_em"], yerr=[[r["cover_em"] - lo], [hi - r["cover_em"]]],
                        fmt="o", capsize=3)
            ax.annotate(r["label"], (r["llm_calls"], r["cover_em"]), fontsize=7)
        ax.set_title(dataset); ax.set_xlabel("LLM calls per question")
    axes[0].set_ylabel("cover-EM (95% CI)"); fig.tight_layout()
    print(len(e2e), "strategy rows,", e2e[0]["n"], "questions in the first")
""",
    ),
    ("md", "## Adaptive-RAG: routing cost and accuracy"),
    (
        "code",
        """\
adaptive = (results.get("adaptive") or {}).get("rows", [])
if adaptive:
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for r in adaptive:
        ax.scatter(r["llm_calls"], r["cover_em"])
        ax.annotate(r["strategy"] + (f" ({r['classifier']})" if r.get("classifier") else ""),
                    (r["llm_calls"], r["cover_em"]), fontsize=7)
    ax.set_xlabel("LLM calls per question"); ax.set_ylabel("cover-EM"); fig.tight_layout()
    print(len(adaptive), "routing rows")
""",
    ),
    ("md", "## Any other result file: its top-level numbers"),
    (
        "code",
        """\
for name, data in results.items():
    if name in ("retrieval", "index_build", "end_to_end", "adaptive"):
        continue
    numbers = {k: v for k, v in data.items() if isinstance(v, (int, float))} if isinstance(data, dict) else {}
    print(name, numbers or type(data).__name__)
""",
    ),
]

DROP_IN = [
    (
        "md",
        "# Drop-in: upgrade an LCEL app to Self-Ask + SUNAR + MER\n\n"
        "An existing RAG app: a vector store with its embeddings, a retriever, a prompt and a "
        "chat model, chained with LCEL. Changing three lines turns it into a Self-Ask loop over "
        "SUNAR retrieval (neighbourhood-aware re-ranking with answer-uncertainty re-scoring) "
        "finished by the Meta Evidence Reasoner. The objects stay the app's own: here the "
        "packaged SmolLM2 chat model and MiniLM embeddings stand in for e.g. `ChatOllama` and "
        "`OllamaEmbeddings`.",
    ),
    (
        "code",
        """\
import json, os
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore
from rag_complexity_agents.config import ModelsConfig
from rag_complexity_agents.corpus.demo import DEMO_CORPUS
from rag_complexity_agents.integrations.langchain import RCAEmbeddings
from rag_complexity_agents.models.chat import load_chat_model

# the app's objects (any BaseChatModel, any Embeddings, any VectorStore)
models = ModelsConfig(max_tokens=32, n_threads=1)
chat = load_chat_model("llamacpp:smollm2-135m", models, models.home)
embeddings = RCAEmbeddings()
rows = [json.loads(line) for line in DEMO_CORPUS.read_text().splitlines()][:60]
vectorstore = InMemoryVectorStore(embeddings)
vectorstore.add_documents(
    [Document(page_content=r["text"], metadata={"title": r["title"]}) for r in rows]
)
print(f"vector store: {len(vectorstore.store)} documents")
""",
    ),
    ("md", "## The app as it was"),
    (
        "code",
        """\
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

question = "Where was the director of Spirited Away born?"
retriever = vectorstore.as_retriever(search_kwargs={"k": 3})
prompt = ChatPromptTemplate.from_messages([
    ("system", "Answer the question in a few words using the passages."),
    ("human", "Passages:\\n{context}\\n\\nQuestion: {question}"),
])
def passages(docs):
    return "\\n".join(d.page_content[:300] for d in docs)

app = {"context": retriever | passages, "question": RunnablePassthrough()} | prompt | chat | StrOutputParser()
print("before:", app.invoke(question))
""",
    ),
    (
        "md",
        "## The upgrade: three changed lines\n\n"
        "`create_rag_agent` takes the same chat model, embeddings and vector store and returns "
        "a compiled LangGraph graph, itself a runnable. The knobs (b, c, m, max_steps) are kept "
        "small for a CPU. Without `pipeline` it builds the pipeline measured best in "
        "`benchmarks/results/end_to_end.md` (plan-and-execute over first-stage retrieval); here "
        "it names SUNAR's three parts in our Self-Ask loop.",
    ),
    (
        "code",
        """\
from rag_complexity_agents import create_rag_agent
agent = create_rag_agent(chat, pipeline="self_ask_sunar_mer", embeddings=embeddings, vectorstore=vectorstore,
                         b=2, c=4, m=2, max_steps=2)
app = {"question": RunnablePassthrough()} | agent | (lambda state: state["answer"])
print("upgraded:", app.invoke(question))
""",
    ),
    ("md", "## What the loop did"),
    (
        "code",
        """\
state = agent.invoke({"question": question})
trace = state["trace"]
for sub_question, answer in trace["reasoning_path"]:
    print("sub-question:", sub_question, "->", answer)
print("MER:", (trace["mer"] or {}).get("answer"))
print("answer:", state["answer"], "| LLM calls:", trace["llm_calls"])
for note in trace["notes"]:
    print("note:", note)
""",
    ),
]

CHAT_APP = [
    (
        "md",
        "# A chat app: the agent as a node of a `MessagesState` graph\n\n"
        "A LangGraph chat app keeps its conversation in `messages`. A pipeline's graph from "
        "`create_rag_agent` is a node of such an app as it is: it reads the last human "
        "message as the question, rewrites a follow-up (\"And where was he born?\") as a "
        "standalone question from the earlier turns, and appends its answer as an "
        "`AIMessage`. A checkpointer keeps the thread between turns.",
    ),
    ("code", SETUP),
    (
        "code",
        """\
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from rag_complexity_agents import create_rag_agent

# the demo collection; the 0.5B model rewrites follow-ups well enough, the 135M does not
chat_config = config.with_overrides({"models.chat": "llamacpp:qwen2.5-0.5b"})
agent = create_rag_agent(config=chat_config, pipeline="single_step")
app = StateGraph(MessagesState)
app.add_node("rag", agent)
app.add_edge(START, "rag")
app.add_edge("rag", END)
chat_app = app.compile(checkpointer=InMemorySaver())
thread = {"configurable": {"thread_id": "demo-chat"}}
""",
    ),
    ("md", "## Two turns: a question, then a follow-up"),
    (
        "code",
        """\
for text in ["Who directed Spirited Away?", "And where was he born?"]:
    state = chat_app.invoke({"messages": [HumanMessage(text)]}, thread)
for message in state["messages"]:
    print(f"{message.type:>5}: {message.content}")
""",
    ),
    ("md", "## What the follow-up was asked as"),
    (
        "code",
        """\
run = agent.invoke({"messages": state["messages"][:-1]})
print([note for note in run["trace"]["notes"] if "follow-up" in note])
print("sources:", [source["title"] for source in run["sources"]])
""",
    ),
]

NOTEBOOKS = {
    "01_quickstart.ipynb": QUICKSTART,
    "02_langchain_app.ipynb": LANGCHAIN,
    "03_llamaindex_app.ipynb": LLAMAINDEX,
    "04_benchmarks.ipynb": BENCHMARKS,
    "05_drop_in.ipynb": DROP_IN,
    "06_chat_app.ipynb": CHAT_APP,
}


def main() -> None:
    for name, cells in NOTEBOOKS.items():
        nbformat.write(notebook(cells), HERE / name)
        print("wrote", HERE / name)


if __name__ == "__main__":
    main()
