"""Bad input to every CLI: exit 2, one line ``error: FILE[:LINE]: what``, and nothing written or left behind.

Each case runs a CLI's ``main`` in-process through ``run_cli`` (as ``python -m`` does). ``{W}`` is a shared
folder of good inputs (toy corpus, topics, qrels, runs, tiny models, a dense and a Lucene index), ``{F}``
the bad files beside this module, ``{T}`` the case's own folder, where ``make`` puts its files first; the
case's output goes to ``{T}`` too. After the error, ``{T}`` and ``{W}`` hold exactly what they held before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import pytest
from conftest import TOY_PASSAGES, TOY_QRELS, TOY_TOPICS, make_tiny_bert

from ance_ir.bm25.__main__ import main as bm25_main
from ance_ir.cli import run_cli
from ance_ir.datasets.__main__ import main as datasets_main
from ance_ir.documents.__main__ import main as documents_main
from ance_ir.encode.__main__ import main as encode_main
from ance_ir.eval.__main__ import main as eval_main
from ance_ir.expand.__main__ import main as expand_main
from ance_ir.fusion.__main__ import main as fusion_main
from ance_ir.gpl.__main__ import main as gpl_main
from ance_ir.index.compress import main as compress_main
from ance_ir.index.rewrite import main as rewrite_main
from ance_ir.negatives.__main__ import main as negatives_main
from ance_ir.plot.__main__ import main as plot_main
from ance_ir.plot.overlap import main as overlap_main
from ance_ir.plot.scores import main as scores_main
from ance_ir.plot.tsne import main as tsne_main
from ance_ir.pretrain_data.__main__ import main as pretrain_data_main
from ance_ir.rerank.__main__ import main as rerank_main
from ance_ir.search.__main__ import main as search_main
from ance_ir.train.__main__ import main as train_main
from ance_ir.train.average import main as average_main

FILES = Path(__file__).resolve().parent / "files"
MAINS = {"bm25": bm25_main, "encode": encode_main, "search": search_main, "fusion": fusion_main, "eval": eval_main,
         "train": train_main, "negatives": negatives_main, "rerank": rerank_main, "datasets": datasets_main,
         "expand": expand_main, "documents": documents_main, "gpl": gpl_main, "pretrain_data": pretrain_data_main,
         "plot": plot_main, "plot.tsne": tsne_main, "plot.scores": scores_main, "plot.overlap": overlap_main,
         "index.compress": compress_main, "index.rewrite": rewrite_main, "train.average": average_main}

NOT_UTF8_AT_151 = b"".join(b"d%d\tpassage number %d\n" % (i, i) for i in range(1, 151)) + b"d151\tcaf\xe9\n"
TRAIN_YAML = ("output: {T}/run\nmodel: {W}/model\ncorpus: {W}/corpus.jsonl\ntrain_topics: {W}/topics.tsv\n"
              "train_qrels: {W}/qrels.txt\nnegatives: random\nmax_steps: 2\nbatch_size: 2\ndevice: cpu\n"
              "progress: false\n")


class Case(NamedTuple):
    cli: str
    argv: str  # split on spaces after filling in {W}, {F}, {T}
    where: str  # the error's FILE[:LINE] ("" for a bad flag)
    what: str  # a fragment of the message after it
    make: dict[str, str | bytes | None] = {}  # files ({T}-relative; None: a folder) the case needs first


#: a BERT folder whose weights file is not safetensors (cut short, or overwritten)
BROKEN_WEIGHTS = {"model": None, "model/vocab.txt": "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n",
                  "model/config.json": '{"model_type": "bert", "vocab_size": 6, "hidden_size": 8, '
                                       '"num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8}',
                  "model/model.safetensors": b"garbage"}
BM25_SEARCH = "search --index {W}/lucene --topics {W}/topics.tsv --output {T}/run.trec"
ENCODE = "--corpus {W}/corpus.jsonl --encoder {W}/model --output {T}/index"
SEARCH = "--topics {W}/topics.tsv --index {W}/dense --output {T}/run.trec"
FUSION = "--runs {W}/run.trec {W}/run2.trec --output {T}/fused.trec"
EVAL = "--qrels {W}/qrels.txt --run {W}/run.trec"
NEGATIVES = "--topics {W}/topics.tsv --qrels {W}/qrels.txt --corpus {W}/corpus.jsonl --output {T}/groups.jsonl"
EXPAND = "--corpus {W}/corpus.jsonl --generator {W}/gen --output {T}/x.jsonl"
JUDGED = "--corpus {W}/corpus.jsonl --topics {W}/topics.tsv --qrels {W}/qrels.txt --output {T}/x.jsonl"
SEGMENTS = {"seg.jsonl": '{"id": "a#0", "contents": "x"}\n{"id": "a#1", "contents": "y"}\n'}
SPLIT = "split --corpus {W}/corpus.jsonl --tokenizer {W}/model --output {T}/s.jsonl"
POOL = "pool --run {W}/run.trec --output {T}/p.trec"
GPL = ("--corpus {W}/corpus.jsonl --generator {W}/gen --retriever {W}/dense --cross-encoder {W}/ce "
       "--output {T}/gpl")
TSNE = ("--index {W}/dense --topics {W}/topics.tsv --qrels {W}/qrels.txt --bm25-run {W}/run.trec --queries q1 "
        "--output {T}/f.png")
SCORES = "--model M {W}/dense {W}/run.trec --topics {W}/topics.tsv --qrels {W}/qrels.txt --output {T}/f.png"
OVERLAP = "--curves {T}/c.json --qrels {W}/qrels.txt --output {T}/f.png"
PRETRAIN = "ict --corpus {W}/corpus.jsonl --output {T}/p.jsonl"
PRETRAIN_SEGMENTS = "ict --corpus {T}/seg.jsonl --output {T}/p.jsonl"
TOPICS_OUT = " --topics-out {T}/t.tsv --qrels-out {T}/q.qrels"
RERANK = "--run {W}/run.trec --topics {W}/topics.tsv --corpus {W}/corpus.jsonl --model {W}/ce --output {T}/ce.trec"

CASES = {
    # bm25 index: every defect of a corpus file, before Java starts
    "bm25-b-above-1": Case("bm25", BM25_SEARCH + " --b 1.5", "", "argument --b: expected a number between 0 and 1"),
    "bm25-index-output-exists": Case("bm25", "index --corpus {W}/corpus.jsonl --output {T}/ix", "",
                                     "{T}/ix already exists; pass --force to replace it", {"ix": None}),
    "bm25-index-missing-corpus": Case("bm25", "index --corpus {T}/nope.jsonl --output {T}/ix", "{T}/nope.jsonl",
                                      "no such corpus file"),
    "bm25-index-empty-corpus": Case("bm25", "index --corpus {F}/empty.tsv --output {T}/ix", "{F}/empty.tsv",
                                    "file is empty"),
    "bm25-index-blank-corpus": Case("bm25", "index --corpus {F}/blank.tsv --output {T}/ix", "{F}/blank.tsv",
                                    "no content lines"),
    "bm25-index-malformed-json": Case("bm25", "index --corpus {F}/corpus_malformed.jsonl --output {T}/ix",
                                      "{F}/corpus_malformed.jsonl:2", "malformed JSON"),
    "bm25-index-json-array": Case("bm25", "index --corpus {F}/corpus_array.jsonl --output {T}/ix",
                                  "{F}/corpus_array.jsonl:1", "expected a JSON object"),
    "bm25-index-no-id": Case("bm25", "index --corpus {F}/corpus_no_id.jsonl --output {T}/ix",
                             "{F}/corpus_no_id.jsonl:2", 'missing or empty "id"'),
    "bm25-index-duplicate-id": Case("bm25", "index --corpus {F}/corpus_duplicate.jsonl --output {T}/ix",
                                    "{F}/corpus_duplicate.jsonl:3", "duplicate id 'd1' (first on line 1)"),
    "bm25-index-space-in-docid": Case("bm25", "index --corpus {F}/corpus_space_id.jsonl --output {T}/ix",
                                      "{F}/corpus_space_id.jsonl:2", "id 'd 2' contains whitespace"),
    "bm25-index-space-in-tsv-docid": Case("bm25", "index --corpus {F}/corpus_space_id.tsv --output {T}/ix",
                                          "{F}/corpus_space_id.tsv:2", "id 'd 2' contains whitespace"),
    "bm25-index-tsv-columns": Case("bm25", "index --corpus {F}/corpus_columns.tsv --output {T}/ix",
                                   "{F}/corpus_columns.tsv:2", "expected 2 columns, found 3"),
    "bm25-index-text-not-string": Case("bm25", "index --corpus {F}/corpus_number_text.jsonl --output {T}/ix",
                                       "{F}/corpus_number_text.jsonl:1", 'non-string "contents"'),
    "bm25-index-not-utf8-line-151": Case("bm25", "index --corpus {T}/c.tsv --output {T}/ix", "{T}/c.tsv:151",
                                         "not UTF-8", {"c.tsv": NOT_UTF8_AT_151}),
    "bm25-index-id-too-long-for-lucene": Case("bm25", "index --corpus {T}/c.jsonl --output {T}/ix", "{T}/c.jsonl",
                                              "Lucene indexed 0 of its 2 passages",
                                              {"c.jsonl": f'{{"id": "{"x" * 40000}", "contents": "a"}}\n'
                                                          '{"id": "d2", "contents": "b"}\n'}),
    "bm25-index-lone-surrogate": Case("bm25", "index --corpus {T}/c.jsonl --output {T}/ix", "{T}/c.jsonl:2",
                                      "a lone surrogate escape (\\ud800) is not text",
                                      {"c.jsonl": '{"id": "d1", "contents": "a"}\n'
                                                  '{"id": "d2", "contents": "\\ud800"}\n'}),
    "bm25-index-json-nested-too-deeply": Case("bm25", "index --corpus {T}/c.jsonl --output {T}/ix", "{T}/c.jsonl:1",
                                              "nested too deeply", {"c.jsonl": "[" * 100000 + "\n"}),
    "bm25-index-broken-gzip": Case("bm25", "index --corpus {F}/corpus_not_gzip.jsonl.gz --output {T}/ix",
                                   "{F}/corpus_not_gzip.jsonl.gz:1", "broken gzip file"),
    "bm25-index-folder-without-corpus": Case("bm25", "index --corpus {T}/data --output {T}/ix",
                                             "{T}/data/corpus.jsonl", "no such file", {"data": None}),
    "bm25-index-output-is-a-file": Case("bm25", "index --corpus {W}/corpus.jsonl --output {T}/ix", "{T}/ix",
                                        "exists and is not a folder", {"ix": "a file"}),
    "bm25-index-output-under-a-file": Case("bm25", "index --corpus {W}/corpus.jsonl --output {T}/f/ix", "{T}/f",
                                           "is not a folder", {"f": "a file"}),
    "bm25-index-threads-0": Case("bm25", "index --corpus {W}/corpus.jsonl --output {T}/ix --threads 0", "",
                                 "argument --threads: expected a positive integer"),
    # bm25 search
    "bm25-search-resume-record-not-an-object": Case(
        "bm25", BM25_SEARCH, "{T}/run.trec.partial/job.json", "unreadable resume record (expected a JSON object)",
        {"run.trec.partial": None, "run.trec.partial/job.json": "null\n"}),
    "eval-qrels-grade-beyond-trec-eval": Case("eval", "--qrels {T}/q.txt --run {W}/run.trec", "{T}/q.txt:2",
                                              "relevance 99999999999999999999 is out of range",
                                              {"q.txt": "q1 0 d1 1\nq1 0 d2 99999999999999999999\n"}),
    "plot-tsne-vectors-not-a-zip": Case("plot.tsne", "--vectors {T}/v.npz --output {T}/f.png", "{T}/v.npz",
                                        "not a vectors file", {"v.npz": b"PK\x03\x04garbage"}),
    "encode-model-without-tokenizer": Case(
        "encode", "--corpus {W}/corpus.jsonl --encoder {T}/m --output {T}/index", "{T}/m", "holds no tokenizer",
        {"m": None, "m/config.json": BROKEN_WEIGHTS["model/config.json"]}),
    "bm25-search-resume-folder-is-a-file": Case("bm25", BM25_SEARCH, "{T}/run.trec.partial",
                                                "is a file where the retrieval's resume folder goes",
                                                {"run.trec.partial": "junk"}),
    "search-unknown-device": Case("search", SEARCH + " --device bogus", "", "device 'bogus': not a device name"),
    "train-unknown-device": Case("train", "--config {T}/c.yaml --device gpu0", "", "device 'gpu0': not a device name",
                                 {"c.yaml": TRAIN_YAML}),
    "bm25-search-missing-index": Case("bm25", BM25_SEARCH.replace("{W}/lucene", "{T}/nowhere"), "{T}/nowhere",
                                      "no such index folder"),
    "bm25-search-hits-0": Case("bm25", BM25_SEARCH + " --hits 0", "", "argument --hits: expected a positive integer"),
    "bm25-search-hits-negative": Case("bm25", BM25_SEARCH + " --hits -5", "", "argument --hits"),
    "bm25-search-k1-nan": Case("bm25", BM25_SEARCH + " --k1 nan", "", "argument --k1: expected a finite number"),
    "bm25-search-b-negative": Case("bm25", BM25_SEARCH + " --b -1", "", "argument --b"),
    "bm25-search-not-an-index": Case("bm25", "search --index {T}/empty --topics {W}/topics.tsv --output {T}/r.trec",
                                     "{T}/empty", "not a Lucene index", {"empty": None}),
    "bm25-search-broken-index": Case("bm25", "search --index {T}/ix --topics {W}/topics.tsv --output {T}/r.trec",
                                     "{T}/ix", "not a readable Lucene index", {"ix": None, "ix/segments_1": "garbage"}),
    "search-broken-bm25-index": Case("search", SEARCH + " --bm25-index {T}/ix", "{T}/ix",
                                     "not a readable Lucene index", {"ix": None, "ix/segments_1": "garbage"}),
    "bm25-search-missing-topics": Case("bm25", "search --index {W}/lucene --topics {T}/t.tsv --output {T}/r.trec",
                                       "{T}/t.tsv", "no such file"),
    "bm25-search-duplicate-qid": Case("bm25", BM25_SEARCH.replace("{W}/topics.tsv", "{F}/topics_duplicate.tsv"),
                                      "{F}/topics_duplicate.tsv:3", "duplicate query id 'q1'"),
    "bm25-search-topics-no-tab": Case("bm25", BM25_SEARCH.replace("{W}/topics.tsv", "{F}/topics_no_tab.tsv"),
                                      "{F}/topics_no_tab.tsv:2", "expected 2 columns, found 1"),
    "bm25-search-empty-query": Case("bm25", BM25_SEARCH.replace("{W}/topics.tsv", "{F}/topics_empty_query.tsv"),
                                    "{F}/topics_empty_query.tsv:2", "query 'q2' has no text"),
    "bm25-search-space-in-qid": Case("bm25", BM25_SEARCH.replace("{W}/topics.tsv", "{F}/topics_space_id.tsv"),
                                     "{F}/topics_space_id.tsv:2", "query id 'q 2' contains whitespace"),
    "bm25-search-output-ends-with-a-slash": Case("bm25", BM25_SEARCH.replace("{T}/run.trec", "{T}/new/"),
                                                 "{T}/new/", "ends with '/', a folder"),
    "bm25-search-output-is-a-folder": Case("bm25", BM25_SEARCH.replace("{T}/run.trec", "{T}/out"), "{T}/out",
                                           "is a folder", {"out": None}),
    # encode
    "encode-merge-an-index-twice": Case("encode", "merge --inputs {W}/dense {W}/dense --output {T}/m",
                                        "{W}/dense/docid", "docid 'd1' is also in the merged {W}/dense"),
    "encode-merge-output-exists": Case("encode", "merge --inputs {W}/dense --output {T}/m", "",
                                       "{T}/m already exists; pass --force to replace it", {"m": None}),
    "encode-centroids-for-a-dense-model": Case("encode", ENCODE + " --centroids 8", "",
                                               "--centroids is for token indexes"),
    "encode-passage-length-above-positions": Case("encode", ENCODE + " --passage-max-length 1000", "",
                                                  "passage_max_length 1000 exceeds the model's 64 positions"),
    "encode-weights-not-safetensors": Case("encode", ENCODE.replace("{W}/model", "{T}/model"), "{T}/model",
                                           "a weights file is not readable safetensors", BROKEN_WEIGHTS),
    "encode-missing-corpus": Case("encode", ENCODE.replace("{W}/corpus.jsonl", "{T}/c.jsonl"), "{T}/c.jsonl",
                                  "no such corpus file"),
    "encode-duplicate-id": Case("encode", ENCODE.replace("{W}/corpus.jsonl", "{F}/corpus_duplicate.jsonl"),
                                "{F}/corpus_duplicate.jsonl:3", "duplicate id"),
    "encode-not-utf8-line-151": Case("encode", ENCODE.replace("{W}/corpus.jsonl", "{T}/c.tsv"), "{T}/c.tsv:151",
                                     "not UTF-8", {"c.tsv": NOT_UTF8_AT_151}),
    "encode-unknown-hub-model": Case("encode", ENCODE.replace("{W}/model", "nosuch-org/nosuch-model"), "",
                                     "model 'nosuch-org/nosuch-model'"),
    "encode-missing-model-folder": Case("encode", ENCODE.replace("{W}/model", "{T}/model"), "",
                                        "model directory"),
    "encode-folder-is-not-a-model": Case("encode", ENCODE.replace("{W}/model", "{T}/model"), "{T}/model",
                                         "not a model folder (no config.json)", {"model": None}),
    "encode-cross-encoder-kind": Case("encode", ENCODE.replace("{W}/model", "{W}/ce"), "",
                                      "'cross-encoder' model writes no index"),
    "encode-generator-kind": Case("encode", ENCODE.replace("{W}/model", "{W}/gen"), "",
                                  "'generator' model writes no index (it writes queries: use python -m "
                                  "ance_ir.expand)"),
    "encode-batch-size-0": Case("encode", ENCODE + " --batch-size 0", "", "argument --batch-size"),
    "encode-chunk-size-0": Case("encode", ENCODE + " --chunk-size 0", "", "argument --chunk-size"),
    "encode-precision-unknown": Case("encode", ENCODE + " --precision fp64", "", "unknown precision 'fp64'"),
    "encode-bad-shard": Case("encode", ENCODE + " --shard 3/2", "", "argument --shard"),
    "encode-output-exists": Case("encode", ENCODE, "", "already exists; pass --force", {"index": None}),
    "encode-output-is-a-file": Case("encode", ENCODE + " --force", "{T}/index", "exists and is not a folder",
                                    {"index": "a file"}),
    # qrels that judge none of the topics: refused before anything is searched or written
    "bm25-search-qrels-judge-no-topic": Case("bm25", BM25_SEARCH + " --qrels {T}/other.qrels", "{T}/other.qrels",
                                             "judges none of the", {"other.qrels": "zz 0 d1 1\n"}),
    "search-qrels-judge-no-topic": Case("search", SEARCH + " --qrels {T}/other.qrels", "{T}/other.qrels",
                                        "judges none of the", {"other.qrels": "zz 0 d1 1\n"}),
    "rerank-qrels-judge-no-topic": Case("rerank", RERANK + " --qrels {T}/other.qrels", "{T}/other.qrels",
                                        "judges none of the", {"other.qrels": "zz 0 d1 1\n"}),
    # dense search
    "search-missing-index": Case("search", SEARCH.replace("{W}/dense", "{T}/nope"), "", "{T}/nope"),
    "search-missing-index-before-topics": Case("search", SEARCH.replace("{W}/dense", "{T}/nope").replace(
        "{W}/topics.tsv", "nosuch-topics"), "{T}/nope", "no such index folder"),
    "search-missing-bm25-index": Case("search", SEARCH + " --bm25-index {T}/nolucene", "{T}/nolucene",
                                      "no such index folder"),
    "search-empty-index-folder": Case("search", SEARCH.replace("{W}/dense", "{T}/empty"), "{T}/empty/index",
                                      "missing (a dense index folder needs",
                                      {"empty": None}),
    "search-plugin-not-python": Case("search", SEARCH + " --import {T}/bad.py", "{T}/bad.py:2",
                                     "not valid Python", {"bad.py": "import os\ndef broken(:\n"}),
    "search-plugin-missing-package": Case("search", SEARCH + " --import {T}/needs.py", "{T}/needs.py",
                                          "plugin cannot be imported (No module named 'no_such_package_xyz')",
                                          {"needs.py": "import no_such_package_xyz\n"}),
    "search-plugin-fails-while-imported": Case("search", SEARCH + " --import {T}/boom.py", "{T}/boom.py:2",
                                               "the plugin failed while it was imported: KeyError: 'scale'",
                                               {"boom.py": "CONFIG = {}\nSCALE = CONFIG['scale']\n"}),
    "search-plugin-takes-a-built-in-name": Case(
        "search", SEARCH + " --import {T}/same.py", "{T}/same.py:3",
        "class Dense: the model kind 'dense' is taken by ance_ir.modeling.encoder.DenseEncoder; choose another",
        {"same.py": "from ance_ir.modeling.kinds import register_model_kind\n\n@register_model_kind\n"
                    "class Dense:\n    kind = 'dense'\n"}),
    # /proc takes no new file, root's or not: an output there is refused before any work
    "search-output-not-writable": Case("search", SEARCH.replace("{T}/run.trec", "/proc/ance-ir/run.trec"), "/proc",
                                       "is not writable (", {}),
    "rerank-output-not-writable": Case("rerank", RERANK.replace("{T}/ce.trec", "/proc/ce.trec"), "/proc",
                                       "is not writable (", {}),
    "negatives-output-not-writable": Case("negatives", NEGATIVES.replace("{T}/groups.jsonl", "/proc/g.jsonl"),
                                          "/proc", "is not writable (", {}),
    "encode-output-not-writable": Case("encode", ENCODE.replace("{T}/index", "/proc/index"), "/proc",
                                       "is not writable (", {}),
    "negatives-unknown-source-with-index": Case("negatives", NEGATIVES + " --source bm52 --index {W}/lucene", "",
                                                "unknown candidate source 'bm52' (did you mean 'bm25'? known:"),
    "search-hits-0": Case("search", SEARCH + " --hits 0", "", "argument --hits"),
    "search-alpha-without-bm25": Case("search", SEARCH + " --alpha 0.5", "",
                                      "--alpha sets hybrid search; it needs --bm25-index"),
    "search-k1-without-bm25-index": Case("search", SEARCH + " --k1 1.2", "", "--k1 sets hybrid search; it needs "
                                                                          "--bm25-index"),
    "search-alpha-with-rrf": Case("search", SEARCH + " --bm25-index {W}/lucene --fusion rrf --alpha 0.5", "",
                                  "--alpha weights --fusion interpolation; rrf has no weight"),
    "search-nprobe-on-a-flat-index": Case("search", SEARCH + " --nprobe 8", "{W}/dense",
                                          "nprobe applies to an IVF index; this one is flat"),
    "search-ef-search-on-a-flat-index": Case("search", SEARCH + " --ef-search 8", "{W}/dense",
                                             "ef_search applies to an HNSW index; this one is flat"),
    "search-alpha-2": Case("search", SEARCH + " --alpha 2", "", "argument --alpha: expected a number between 0 and 1"),
    "search-wrong-dimension": Case("search", SEARCH + " --encoder {W}/model16", "",
                                   "dimension"),
    "search-cross-encoder-kind": Case("search", SEARCH + " --encoder {W}/ce", "", "cross-encoder"),
    "search-output-is-a-folder": Case("search", SEARCH.replace("{T}/run.trec", "{T}/out"), "{T}/out", "is a folder",
                                      {"out": None}),
    "search-empty-query": Case("search", SEARCH.replace("{W}/topics.tsv", "{F}/topics_empty_query.tsv"),
                               "{F}/topics_empty_query.tsv:2", "has no text"),
    "search-bad-bm25-index": Case("search", SEARCH + " --bm25-index {T}/empty", "{T}/empty", "not a Lucene index",
                                  {"empty": None}),
    "search-bad-qrels": Case("search", SEARCH + " --qrels {F}/qrels_grade.txt", "{F}/qrels_grade.txt:2",
                             "relevance 'high' is not an integer"),
    # fusion
    "fusion-k-0": Case("fusion", FUSION + " --k 0", "", "argument --k: expected a positive integer"),
    "fusion-hits-0": Case("fusion", FUSION + " --hits 0", "", "argument --hits"),
    "fusion-rrf-k-negative": Case("fusion", FUSION + " --rrf-k -1", "", "argument --rrf-k"),
    "fusion-alpha-1.5": Case("fusion", FUSION + " --method interpolation --alpha 1.5", "", "argument --alpha"),
    "eval-seed-0-with-one-run": Case("eval", EVAL + " --seed 0", "", "is a setting of comparing runs"),
    "eval-seed-negative": Case("eval", EVAL + " --run {W}/run.trec --seed -1", "",
                               "argument --seed: expected an integer >= 0, got '-1'"),
    "fusion-alpha-0-with-rrf": Case("fusion", FUSION + " --alpha 0", "", "--alpha is a setting of --method "
                                                                          "interpolation, not of rrf"),
    "fusion-nan-score": Case("fusion", FUSION.replace("{W}/run2.trec", "{F}/run_nan.trec"), "{F}/run_nan.trec:2",
                             "score 'NaN' is not a finite number"),
    "fusion-inf-score": Case("fusion", FUSION.replace("{W}/run2.trec", "{F}/run_inf.trec"), "{F}/run_inf.trec:1",
                             "score 'inf' is not a finite number"),
    "fusion-minus-inf-score": Case("fusion", FUSION.replace("{W}/run.trec", "{F}/run_minus_inf.trec"),
                                   "{F}/run_minus_inf.trec:1", "not a finite number"),
    "fusion-run-columns": Case("fusion", FUSION.replace("{W}/run2.trec", "{F}/run_columns.trec"),
                               "{F}/run_columns.trec:1", "expected 6 columns, found 5"),
    "fusion-run-score-text": Case("fusion", FUSION.replace("{W}/run2.trec", "{F}/run_score.trec"),
                                  "{F}/run_score.trec:1", "is not a number"),
    "fusion-run-duplicate-doc": Case("fusion", FUSION.replace("{W}/run2.trec", "{F}/run_duplicate.trec"),
                                     "{F}/run_duplicate.trec:2", "document 'd1' appears twice"),
    "fusion-missing-run": Case("fusion", FUSION.replace("{W}/run2.trec", "{T}/nope.trec"), "{T}/nope.trec",
                               "no such file"),
    "fusion-interpolation-three-runs": Case("fusion", FUSION.replace(" --output", " {W}/run.trec --output")
                                            + " --method interpolation", "",
                                            "interpolation needs exactly two runs, got 3"),
    "fusion-rrf-one-run": Case("fusion", "--runs {W}/run.trec --output {T}/fused.trec", "",
                               "rrf needs at least two runs"),
    "fusion-average-one-run": Case("fusion", "--runs {W}/run.trec --method average --output {T}/fused.trec", "",
                                   "average needs at least two runs"),
    "fusion-average-with-tune": Case("fusion", FUSION + " --method average --tune {W}/qrels.txt", "",
                                     "--tune is a setting of --method interpolation, not of average"),
    "fusion-rrf-k-with-average": Case("fusion", FUSION + " --method average --rrf-k 10", "",
                                      "--rrf-k is a setting of --method rrf, not of average"),
    "fusion-output-is-a-folder": Case("fusion", FUSION.replace("{T}/fused.trec", "{T}/out"), "{T}/out",
                                      "is a folder", {"out": None}),
    "fusion-alpha-with-rrf": Case("fusion", FUSION + " --alpha 0.3", "",
                                  "--alpha is a setting of --method interpolation, not of rrf (the default method)"),
    "fusion-rrf-k-with-interpolation": Case("fusion", FUSION + " --method interpolation --rrf-k 10", "",
                                            "--rrf-k is a setting of --method rrf"),
    "fusion-alpha-and-tune": Case("fusion", FUSION + " --method interpolation --alpha 0.3 --tune {W}/qrels.txt", "",
                                  "--alpha and --tune both set the weight"),
    "fusion-tune-qrels-of-other-queries": Case("fusion", FUSION + " --method interpolation --tune {T}/q.txt",
                                               "{T}/q.txt", "judges no query of", {"q.txt": "nobody 0 d1 1\n"}),
    "fusion-tune-bad-qrels": Case("fusion", FUSION + " --method interpolation --tune {F}/qrels_duplicate.txt",
                                  "{F}/qrels_duplicate.txt:2", "duplicate judgment"),
    # eval
    "eval-missing-qrels": Case("eval", EVAL.replace("{W}/qrels.txt", "{T}/q.txt"), "{T}/q.txt", "no such file"),
    "eval-grade-not-integer": Case("eval", EVAL.replace("{W}/qrels.txt", "{F}/qrels_grade.txt"),
                                   "{F}/qrels_grade.txt:2", "relevance 'high' is not an integer"),
    "eval-qrels-columns": Case("eval", EVAL.replace("{W}/qrels.txt", "{F}/qrels_columns.txt"),
                               "{F}/qrels_columns.txt:2", "expected 4 columns, found 3"),
    "eval-qrels-duplicate": Case("eval", EVAL.replace("{W}/qrels.txt", "{F}/qrels_duplicate.txt"),
                                 "{F}/qrels_duplicate.txt:2", "duplicate judgment for query 'q1', document 'd1'"),
    "eval-qrels-header-only": Case("eval", EVAL.replace("{W}/qrels.txt", "{F}/qrels_header_only.tsv"),
                                   "{F}/qrels_header_only.tsv", "BEIR qrels with a header and no judgments"),
    "eval-qrels-bom-and-bad-byte": Case("eval", EVAL.replace("{W}/qrels.txt", "{T}/q.txt"), "{T}/q.txt:3",
                                        "not UTF-8", {"q.txt": b"\xef\xbb\xbfq1 0 d1 1\nq1 0 d2 0\nq2 0 d\xff 1\n"}),
    "eval-run-nan": Case("eval", EVAL.replace("{W}/run.trec", "{F}/run_nan.trec"), "{F}/run_nan.trec:2",
                         "not a finite number"),
    "eval-unknown-measure": Case("eval", EVAL + " --metrics ndcg@x", "", "ndcg@x"),
    "eval-no-judged-query": Case("eval", EVAL.replace("{W}/run.trec", "{F}/run_unjudged.trec"),
                                 "{F}/run_unjudged.trec", "no query of the run has judgments"),
    "eval-answers-without-corpus": Case("eval", "--answers {F}/answers_not_list.jsonl --run {W}/run.trec", "",
                                        "--answers needs --corpus"),
    "eval-answers-not-a-list": Case("eval", "--answers {F}/answers_not_list.jsonl --corpus {W}/corpus.jsonl "
                                            "--run {W}/run.trec", "{F}/answers_not_list.jsonl:1", "answers"),
    # train
    "train-bad-yaml": Case("train", "--config {F}/train_bad_yaml.yaml", "{F}/train_bad_yaml.yaml:1",
                           "not valid YAML"),
    "train-unknown-setting": Case("train", "--config {T}/c.yaml", "{T}/c.yaml:11", "learning_rate: unknown setting",
                                  {"c.yaml": TRAIN_YAML + "learning_rate: 1e-5\n"}),
    "train-lr-inf": Case("train", "--config {T}/c.yaml", "{T}/c.yaml:11", "must be a positive finite number",
                         {"c.yaml": TRAIN_YAML + "lr: .inf\n"}),
    "train-config-not-utf8": Case("train", "--config {T}/c.yaml", "{T}/c.yaml:11", "not UTF-8 text",
                                  {"c.yaml": TRAIN_YAML.encode() + b"seed: caf\xe9\n"}),
    "average-weights-not-safetensors": Case("train.average", "--models {T}/model {T}/model --output {T}/avg",
                                            "{T}/model", "a weights file is not readable safetensors",
                                            BROKEN_WEIGHTS),
    "train-section-not-a-mapping": Case("train", "--config {T}/c.yaml", "{T}/c.yaml:11",
                                        "optim: a section takes a mapping of its settings",
                                        {"c.yaml": TRAIN_YAML + "optim: 5\n"}),
    "train-set-not-yaml": Case("train", "--config {T}/c.yaml --set optim.lr=[x", "",
                               "--set optim.lr=[x: not a YAML value", {"c.yaml": TRAIN_YAML}),
    "train-output-not-writable": Case("train", "--config {T}/c.yaml --output /proc/run", "/proc",
                                      "is not writable (", {"c.yaml": TRAIN_YAML}),
    # found before step 0 (not by the first refresh, after a checkpoint was written)
    "train-eval-topics-without-qrels": Case("train", "--config {T}/c.yaml --eval-topics {W}/topics.tsv --refresh-mode "
                                            "sync --refresh-every 1", "",
                                            "refresh.eval_topics: {W}/topics.tsv has no qrels of its own",
                                            {"c.yaml": TRAIN_YAML}),
    "train-eval-qrels-judge-none": Case("train", "--config {T}/c.yaml --eval-topics {W}/topics.tsv --eval-qrels "
                                        "{T}/e.qrels --refresh-mode sync --refresh-every 1", "",
                                        "refresh.eval_qrels: judge none of the eval_topics",
                                        {"c.yaml": TRAIN_YAML, "e.qrels": "nobody 0 d1 1\n"}),
    "train-eval-qrels-of-another-corpus": Case("train", "--config {T}/c.yaml --eval-topics {W}/topics.tsv --eval-qrels "
                                               "{T}/e.qrels --refresh-mode sync --refresh-every 1", "",
                                               "refresh.eval_qrels: judge no passage of the training corpus",
                                               {"c.yaml": TRAIN_YAML, "e.qrels": "q1 0 elsewhere 1\n"}),
    "train-candidates-missing-index": Case(
        "train",
        "--config {T}/c.yaml --negatives candidates --set negatives.source=dense --set negatives.index={T}/nope",
        "{T}/nope", "no such dense index folder (negatives.index: --set negatives.index=PATH)", {"c.yaml": TRAIN_YAML}),
    "train-missing-corpus": Case("train", "--config {T}/c.yaml --corpus {T}/nope.jsonl", "{T}/nope.jsonl",
                                 "no such corpus file", {"c.yaml": TRAIN_YAML}),
    "train-duplicate-topics": Case("train", "--config {T}/c.yaml --train-topics {F}/topics_duplicate.tsv",
                                   "{F}/topics_duplicate.tsv:3", "duplicate query id", {"c.yaml": TRAIN_YAML}),
    "train-no-positives": Case("train", "--config {T}/c.yaml --train-qrels {F}/qrels_no_positive.txt", "",
                               "(data.min_positive_grade) in {F}/qrels_no_positive.txt; its grades: 0",
                               {"c.yaml": TRAIN_YAML}),
    "train-qrels-of-other-topics": Case("train", "--config {T}/c.yaml --train-qrels {T}/o.qrels", "",
                                        "no training pairs: {T}/o.qrels judges none of the topics",
                                        {"c.yaml": TRAIN_YAML, "o.qrels": "nobody 0 d1 1\n"}),
    "train-qrels-of-another-corpus": Case("train", "--config {T}/c.yaml --train-qrels {T}/o.qrels", "",
                                          "none of the 2 passages {T}/o.qrels judges >= 1 for a topic",
                                          {"c.yaml": TRAIN_YAML, "o.qrels": "q1 0 x1 1\nq2 0 x2 1\n"}),
    "train-seed-negative": Case("train", "--config {T}/c.yaml --seed -1", "", "seed: must be from 0 to 2**32 - 1",
                                {"c.yaml": TRAIN_YAML}),
    "train-batch-size-0": Case("train", "--config {T}/c.yaml --batch-size 0", "", "batch_size: must be at least 1",
                               {"c.yaml": TRAIN_YAML}),
    "train-output-is-a-file": Case("train", "--config {T}/c.yaml", "{T}/run", "exists and is not a folder",
                                   {"c.yaml": TRAIN_YAML, "run": "a file"}),
    "train-teacher-index-missing": Case("train", "--config {T}/c.yaml --loss kl --teacher-index {T}/nowhere",
                                        "{T}/nowhere", "no such dense index folder", {"c.yaml": TRAIN_YAML}),
    "train-teacher-index-without-distillation": Case("train", "--config {T}/c.yaml --teacher-index {W}/dense", "",
                                                     "loss 'nll' uses no teacher scores", {"c.yaml": TRAIN_YAML}),
    # negatives
    "negatives-bm25-without-index": Case("negatives", NEGATIVES, "", "--source bm25 needs --index"),
    "negatives-run-without-run": Case("negatives", NEGATIVES + " --source run", "", "--source run needs --run"),
    "negatives-depth-0": Case("negatives", NEGATIVES + " --depth 0", "", "argument --depth"),
    "negatives-negative-exclude-grade": Case("negatives", NEGATIVES + " --exclude-grade -1", "",
                                             "argument --exclude-grade"),
    "negatives-pseudo-positives-with-qrels": Case("negatives", NEGATIVES + " --source run --run {W}/run.trec "
                                                  "--pseudo-positives 1", "", "--pseudo-positives labels topics"),
    "negatives-pseudo-positives-0": Case("negatives", NEGATIVES + " --pseudo-positives 0", "",
                                         "argument --pseudo-positives"),
    "negatives-margin-negative": Case("negatives", NEGATIVES + " --margin -1", "", "argument --margin"),
    "negatives-k1-nan": Case("negatives", NEGATIVES + " --k1 nan", "", "argument --k1: expected a finite number"),
    "negatives-run-nan": Case("negatives", NEGATIVES + " --source run --run {F}/run_nan.trec", "{F}/run_nan.trec:2",
                              "not a finite number"),
    "negatives-run-of-other-topics": Case("negatives", NEGATIVES + " --source run --run {T}/r.trec --quiet", "",
                                          "the run source gave no candidates for any of the",
                                          {"r.trec": "zz Q0 d1 1 2.0 t\n"}),
    "negatives-unknown-source": Case("negatives", NEGATIVES + " --source nosuch", "", "nosuch"),
    "negatives-k1-with-run-source": Case("negatives", NEGATIVES + " --source run --run {W}/run.trec --k1 5", "",
                                         "--k1 does not apply to --source run"),
    "negatives-batch-size-with-bm25": Case("negatives", NEGATIVES + " --index {W}/lucene --batch-size 8", "",
                                           "--batch-size does not apply to --source bm25"),
    "negatives-source-option-with-bm25": Case("negatives", NEGATIVES + " --source-option a=b", "",
                                              "--source-option does not apply to --source bm25"),
    "negatives-no-positives": Case("negatives", NEGATIVES.replace("{W}/qrels.txt", "{F}/qrels_no_positive.txt")
                                   + " --source run --run {W}/run.trec", "", "no training groups"),
    "negatives-output-is-a-folder": Case("negatives", NEGATIVES.replace("{T}/groups.jsonl", "{T}/out")
                                         + " --source run --run {W}/run.trec", "{T}/out", "is a folder",
                                         {"out": None}),
    # rerank
    "rerank-depth-0": Case("rerank", RERANK + " --depth 0", "", "--depth must be at least 1"),
    "rerank-hits-0": Case("rerank", RERANK + " --hits 0", "", "--hits must be at least 1"),
    "rerank-run-without-topics": Case("rerank", RERANK.replace(" --topics {W}/topics.tsv", ""), "",
                                      "--run needs --topics"),
    "rerank-unknown-query": Case("rerank", RERANK.replace("{W}/run.trec", "{F}/run_unknown_query.trec"),
                                 "{F}/run_unknown_query.trec", "query 'q9' is not in the topics"),
    "rerank-unknown-document": Case("rerank", RERANK.replace("{W}/run.trec", "{F}/run_unknown_doc.trec"),
                                    "{F}/run_unknown_doc.trec", "document 'd404' of query 'q1' is not in the corpus"),
    "rerank-dense-model": Case("rerank", RERANK.replace("{W}/ce", "{W}/model"), "",
                               "has no trained cross-encoder head"),
    "rerank-run-inf": Case("rerank", RERANK.replace("{W}/run.trec", "{F}/run_inf.trec"), "{F}/run_inf.trec:1",
                           "not a finite number"),
    "rerank-bad-groups": Case("rerank", "--groups {F}/groups_no_negatives.jsonl --corpus {W}/corpus.jsonl "
                                        "--model {W}/ce --output {T}/g.jsonl", "{F}/groups_no_negatives.jsonl:1",
                              '"negative_passages"'),
    "rerank-groups-with-depth": Case("rerank", "--groups {F}/groups_no_negatives.jsonl --corpus {W}/corpus.jsonl "
                                     "--model {W}/ce --depth 10 --output {T}/g.jsonl", "",
                                     "--depth is a setting of --run, not of --groups"),
    "rerank-output-is-a-folder": Case("rerank", RERANK.replace("{T}/ce.trec", "{T}/out"), "{T}/out", "is a folder",
                                      {"out": None}),
    # expand
    "expand-missing-corpus": Case("expand", EXPAND.replace("{W}/corpus.jsonl", "{T}/c.jsonl"), "{T}/c.jsonl",
                                  "no such corpus file"),
    "expand-duplicate-id": Case("expand", EXPAND.replace("{W}/corpus.jsonl", "{F}/corpus_duplicate.jsonl"),
                                "{F}/corpus_duplicate.jsonl:3", "duplicate id"),
    "expand-n-0": Case("expand", EXPAND + " --n 0", "", "argument --n: expected a positive integer"),
    "expand-top-p-0": Case("expand", EXPAND + " --top-p 0", "", "argument --top-p: expected a number above 0"),
    "expand-max-length-past-positions": Case("expand", EXPAND + " --max-length 100", "",
                                             "at most the decoder's 64 positions, got 100"),
    "expand-temperature-0": Case("expand", EXPAND + " --temperature 0", "", "argument --temperature"),
    "expand-no-source": Case("expand", "--corpus {W}/corpus.jsonl --output {T}/x.jsonl", "",
                             "one of the arguments --generator --topics is required"),
    "expand-generator-and-topics": Case("expand", EXPAND + " --topics {W}/topics.tsv", "",
                                        "argument --topics: not allowed with argument --generator"),
    "expand-unknown-hub-generator": Case("expand", EXPAND.replace("{W}/gen", "nosuch-org/nosuch-model"), "",
                                         "model 'nosuch-org/nosuch-model'"),
    "expand-missing-generator-folder": Case("expand", EXPAND.replace("{W}/gen", "{T}/gen"), "", "model directory"),
    "expand-cross-encoder-kind": Case("expand", EXPAND.replace("{W}/gen", "{W}/ce"), "",
                                      "is a 'cross-encoder' model, expected a 'generator' model"),
    "expand-plain-encoder": Case("expand", EXPAND.replace("{W}/gen", "{W}/model"), "{W}/model",
                                 "an encoder checkpoint, not a trained query generator"),
    "expand-output-exists": Case("expand", EXPAND, "{T}/x.jsonl", "already exists; pass --force",
                                 {"x.jsonl": "old"}),
    "expand-queries-file-exists": Case("expand", EXPAND, "{T}/x.jsonl.queries.jsonl", "already exists",
                                       {"x.jsonl.queries.jsonl": "old"}),
    "expand-output-is-a-folder": Case("expand", EXPAND, "{T}/x.jsonl", "is a folder", {"x.jsonl": None}),
    "expand-output-under-a-file": Case("expand", EXPAND.replace("{T}/x.jsonl", "{T}/f/x.jsonl"), "{T}/f",
                                       "is not a folder", {"f": "a file"}),
    "expand-output-is-the-corpus": Case("expand", EXPAND.replace("{W}/corpus.jsonl", "{T}/c.jsonl")
                                        .replace("{T}/x.jsonl", "{T}/c.jsonl") + " --force", "{T}/c.jsonl",
                                        "is the corpus itself", {"c.jsonl": '{"id": "d1", "contents": "x"}\n'}),
    "expand-output-is-its-qrels": Case("expand", JUDGED.replace("{W}/qrels.txt", "{T}/q.txt").replace(
        "{T}/x.jsonl", "{T}/q.txt") + " --force", "{T}/q.txt", "is the input {T}/q.txt",
        {"q.txt": "q1 0 d1 1\n"}),
    "expand-queries-file-is-its-topics": Case("expand", JUDGED.replace("{W}/topics.tsv", "{T}/x.jsonl.queries.jsonl")
                                              + " --force", "{T}/x.jsonl.queries.jsonl", "is the input",
                                              {"x.jsonl.queries.jsonl": "q1\tx\n"}),
    "expand-tsv-output": Case("expand", EXPAND.replace("x.jsonl", "x.tsv"), "{T}/x.tsv",
                              "the expanded corpus is JSONL"),
    "expand-topics-without-qrels": Case("expand", JUDGED.replace(" --qrels {W}/qrels.txt", ""), "",
                                        "no qrels are known for {W}/topics.tsv; pass --qrels"),
    "expand-bad-qrels": Case("expand", JUDGED.replace("{W}/qrels.txt", "{F}/qrels_grade.txt"),
                             "{F}/qrels_grade.txt:2", "relevance 'high' is not an integer"),
    "expand-nothing-judged": Case("expand", JUDGED.replace("{W}/qrels.txt", "{F}/qrels_no_positive.txt"), "",
                                  "no passage is judged >= 1"),
    "expand-qrels-of-another-corpus": Case("expand", JUDGED.replace("{W}/qrels.txt", "{T}/q.txt"), "{W}/corpus.jsonl",
                                           "holds none of the 1 passages", {"q.txt": "q1 0 x9 1\n"}),
    # documents
    "documents-derive-missing-corpus": Case("documents", "derive --corpus {T}/nope.jsonl --output {T}/d",
                                            "{T}/nope.jsonl", "no such corpus file"),
    "documents-derive-no-segment-ids": Case("documents", "derive --corpus {W}/corpus.jsonl --output {T}/d",
                                            "{W}/corpus.jsonl", "no passage id contains the delimiter '#'"),
    "documents-derive-bad-qrels": Case("documents", "derive --corpus {T}/seg.jsonl --qrels {F}/qrels_grade.txt "
                                       "--output {T}/d", "{F}/qrels_grade.txt:2", "relevance 'high' is not an integer",
                                       SEGMENTS),
    "documents-derive-qrels-to-one-file": Case("documents", "derive --corpus {T}/seg.jsonl --qrels {W}/qrels.txt "
                                               "{F}/qrels.txt --output {T}/d", "",
                                               "two of them would both be written to qrels.qrels.txt", SEGMENTS),
    "documents-derive-qrels-of-another-corpus": Case("documents", "derive --corpus {T}/seg.jsonl --qrels "
                                                     "{W}/qrels.txt --output {T}/d", "{W}/qrels.txt",
                                                     "judges none of the documents", SEGMENTS),
    "documents-derive-output-is-a-file": Case("documents", "derive --corpus {T}/seg.jsonl --output {T}/d", "{T}/d",
                                              "exists and is not a folder", {**SEGMENTS, "d": "a file"}),
    "documents-empty-delimiter": Case("documents", POOL + " --delimiter=", "",
                                      "argument --delimiter: expected a non-empty string"),
    "documents-split-length-past-positions": Case("documents", SPLIT + " --length 63", "",
                                                  "at most the model's 64 positions less its 2 special tokens, 62"),
    "documents-split-id-with-the-delimiter": Case("documents", SPLIT.replace("{W}/corpus.jsonl", "{T}/seg.jsonl")
                                                  + " --length 32",
                                                  "{T}/seg.jsonl", "document id 'a#0' contains the delimiter '#'",
                                                  SEGMENTS),
    "documents-split-stride-0": Case("documents", SPLIT + " --stride 0", "", "argument --stride"),
    "documents-split-missing-tokenizer": Case("documents", SPLIT.replace("{W}/model", "{T}/model"), "",
                                              "model directory"),
    "documents-split-output-is-a-folder": Case("documents", SPLIT, "{T}/s.jsonl", "is a folder",
                                               {"s.jsonl": None}),
    "documents-pool-no-segment-ids": Case("documents", POOL, "{W}/run.trec", "no passage id contains the delimiter"),
    "documents-pool-nan-score": Case("documents", POOL.replace("{W}/run.trec", "{F}/run_nan.trec"),
                                     "{F}/run_nan.trec:2", "not a finite number"),
    "documents-pool-first-without-first-segments": Case("documents", POOL.replace("{W}/run.trec", "{T}/r.trec")
                                                        + " --pooling first", "{T}/r.trec",
                                                        "first pooling leaves no document",
                                                        {"r.trec": "q1 Q0 a#1 1 2.0 t\nq1 Q0 b#2 2 1.0 t\n"}),
    "documents-pool-id-starts-with-the-delimiter": Case("documents", POOL.replace("{W}/run.trec", "{T}/r.trec"),
                                                        "{T}/r.trec", "passage id '#1' starts with the delimiter",
                                                        {"r.trec": "q1 Q0 a#0 1 2.0 t\nq1 Q0 #1 2 1.0 t\n"}),
    "documents-split-index-as-tokenizer": Case("documents", SPLIT.replace("{W}/model", "{W}/dense"), "{W}/dense",
                                               "an index folder (meta.json), not a model"),
    "documents-pool-hits-0": Case("documents", POOL + " --hits 0", "", "argument --hits"),
    # gpl: every input checked before the first stage
    "gpl-retriever-not-an-index": Case("gpl", GPL.replace("{W}/dense", "{W}/model"), "{W}/model/index", "missing"),
    "gpl-missing-corpus": Case("gpl", GPL.replace("{W}/corpus.jsonl", "{T}/nope.jsonl"), "{T}/nope.jsonl",
                               "no such corpus file"),
    "gpl-generator-of-another-kind": Case("gpl", GPL.replace("{W}/gen", "{W}/ce"), "",
                                          "is a 'cross-encoder' model, expected a 'generator' model"),
    "gpl-cross-encoder-of-another-kind": Case("gpl", GPL.replace("{W}/ce", "{W}/gen"), "",
                                              "is a 'generator' model, expected a 'cross-encoder' model"),
    "gpl-missing-cross-encoder": Case("gpl", GPL.replace("{W}/ce", "{T}/ce"), "", "model directory"),
    "gpl-model-of-another-kind": Case("gpl", GPL + " --model {W}/ce", "",
                                      "--model: {W}/ce is a 'cross-encoder' model, expected a 'dense' model"),
    "gpl-train-config-unknown-setting": Case("gpl", GPL + " --train-config {T}/t.yaml", "{T}/t.yaml:1",
                                             "bogus_key: unknown setting", {"t.yaml": "bogus_key: 1\n"}),
    "gpl-negative-seed": Case("gpl", GPL + " --seed -1", "", "seed: must be from 0 to 2**32 - 1"),
    "gpl-missing-train-config": Case("gpl", GPL + " --train-config {T}/nope.yaml", "{T}/nope.yaml",
                                     "no such training config file"),
    "gpl-output-is-a-file": Case("gpl", GPL, "{T}/gpl", "exists and is not a folder", {"gpl": "a file"}),
    "gpl-depth-0": Case("gpl", GPL + " --depth 0", "", "argument --depth"),
    # pretrain_data
    "pretrain-data-missing-corpus": Case("pretrain_data", PRETRAIN.replace("{W}/corpus", "{T}/nope"),
                                         "{T}/nope.jsonl", "no such corpus file"),
    "pretrain-data-topics-and-qrels-out-the-same-file": Case("pretrain_data", PRETRAIN + " --topics-out {T}/x "
                                                             "--qrels-out {T}/x", "",
                                                             "--topics-out and --qrels-out name the same file"),
    "pretrain-data-output-and-topics-out-the-same-file": Case("pretrain_data", PRETRAIN + " --topics-out {T}/p.jsonl "
                                                              "--qrels-out {T}/q", "",
                                                              "--output and --topics-out name the same file"),
    "pretrain-data-option-given-twice": Case("pretrain_data", PRETRAIN + " --option k=1 --option k=2", "",
                                             "--option k: given twice"),
    "negatives-min-pseudo-score-nan": Case("negatives", NEGATIVES + " --min-pseudo-score nan", "",
                                           "argument --min-pseudo-score: expected a finite number"),
    "pretrain-data-option-without-value": Case("pretrain_data", PRETRAIN + " --option sentences", "",
                                               "expected KEY=VALUE"),
    "pretrain-data-unknown-option": Case("pretrain_data", PRETRAIN + " --option nosuch=1", "",
                                         "--option nosuch: unknown setting"),
    "pretrain-data-bad-option-value": Case("pretrain_data", PRETRAIN.replace("ict", "wlp") + " --option titles=x",
                                           "", "--option titles: must be one of"),
    "pretrain-data-sample-0": Case("pretrain_data", PRETRAIN + " --sample 0", "", "argument --sample"),
    "pretrain-data-output-is-a-folder": Case("pretrain_data", PRETRAIN, "{T}/p.jsonl", "is a folder",
                                             {"p.jsonl": None}),
    "pretrain-data-no-pairs": Case("pretrain_data", PRETRAIN, "{W}/corpus.jsonl", "no ict training pairs"),
    "pretrain-data-no-documents": Case("pretrain_data", PRETRAIN.replace("ict", "bfs"), "{W}/corpus.jsonl",
                                       "the corpus names no documents (ids DOC#N_... (or set --option doc_field))"),
    "pretrain-data-qgen-without-queries": Case("pretrain_data", PRETRAIN.replace("ict", "qgen"), "",
                                               "--option queries: QGen trains on generated queries"),
    "pretrain-data-topics-without-qrels": Case("pretrain_data", PRETRAIN + " --topics-out {T}/t.tsv", "",
                                               "--topics-out and --qrels-out go together"),
    "pretrain-data-option-not-yaml": Case("pretrain_data", PRETRAIN.replace("ict", "wlp") + " --option titles=[x",
                                          "", "--option 'titles=[x': the value is not valid YAML"),
    "pretrain-data-topics-without-corpus-positives": Case(
        "pretrain_data", PRETRAIN_SEGMENTS.replace("ict", "simcse") + TOPICS_OUT, "",
        "no simcse pair has a corpus passage as its positive", SEGMENTS),
    "pretrain-data-topics-of-shielded-pairs": Case(
        "pretrain_data", PRETRAIN_SEGMENTS.replace("ict", "bfs") + TOPICS_OUT, "",
        "bfs pairs keep other corpus passages from being their negatives (bfs-0: 1 of them)", SEGMENTS),
    "pretrain-data-spider-min-span-0": Case("pretrain_data", PRETRAIN.replace("ict", "spider") +
                                            " --option min_span=0", "", "--option min_span: must be at least 1, got 0"),
    "pretrain-data-spider-window-under-span": Case("pretrain_data", PRETRAIN.replace("ict", "spider") +
                                                   " --option window=3", "",
                                                   "need min_span <= max_span <= window, got 2, 5 and 3"),
    "pretrain-data-ict-keep-above-1": Case("pretrain_data", PRETRAIN + " --option keep=1.5", "",
                                           "--option keep: must be between 0 and 1, got 1.5"),
    "pretrain-data-ict-keep-nan": Case("pretrain_data", PRETRAIN + " --option keep=.nan", "",
                                       "--option keep: must be between 0 and 1, got nan"),
    "pretrain-data-simcse-negative-words": Case("pretrain_data", PRETRAIN.replace("ict", "simcse") +
                                                " --option max_words=-1", "", "--option max_words: must be at least 0"),
    # plot
    "plot-missing-run": Case("plot", "{T}/nope", "{T}/nope/log.jsonl", "no such training log"),
    "plot-malformed-log": Case("plot", "{T}/run", "{T}/run/log.jsonl:1", "malformed JSON",
                               {"run": None, "run/log.jsonl": "{bad\n"}),
    "plot-log-not-utf8": Case("plot", "{T}/run", "{T}/run/log.jsonl:2", "not UTF-8",
                              {"run": None, "run/log.jsonl": b'{"step": 1}\n{"step": 2, "x": "\xff"}\n'}),
    "plot-output-is-a-file": Case("plot", "{T}/run --output {T}/f", "{T}/f", "exists and is not a folder",
                                  {"run": None, "run/log.jsonl": '{"step": 1, "loss": 1.0}\n', "f": "a file"}),
    "plot-several-runs-without-output": Case("plot", "{T}/a {T}/b", "", "--output is needed"),
    # plot.tsne, plot.scores, plot.overlap
    "tsne-unknown-query": Case("plot.tsne", TSNE.replace("q1", "q9"), "", "--topics: has no query 'q9'"),
    "tsne-index-without-topics": Case("plot.tsne", "--index {W}/dense --output {T}/f.png", "",
                                      "--index needs --topics, --qrels, --bm25-run, --queries"),
    "tsne-not-a-vectors-file": Case("plot.tsne", "--vectors {W}/run.trec --output {T}/f.png", "{W}/run.trec",
                                    "not a vectors file"),
    "tsne-not-an-index": Case("plot.tsne", TSNE.replace("{W}/dense", "{W}/model"), "{W}/model/index", "missing"),
    "scores-negatives-without-a-topic": Case("plot.scores", SCORES.replace("{W}/run.trec", "{T}/n.trec"), "",
                                             "has no query", {"n.trec": "q1 Q0 d1 1 1.0 r\n"}),
    "scores-queries-0": Case("plot.scores", SCORES + " --queries 0", "", "argument --queries"),
    "scores-output-is-a-folder": Case("plot.scores", SCORES, "{T}/f.png", "is a folder", {"f.png": None}),
    "scores-malformed-lines": Case("plot.scores", "--lines {T}/l.json --output {T}/f.png", "{T}/l.json",
                                   "not a lines file", {"l.json": "{"}),
    "scores-lines-without-lines": Case("plot.scores", "--lines {T}/l.json --output {T}/f.png", "{T}/l.json",
                                       "a panel without lines",
                                       {"l.json": '[{"label": "A", "overlap": 0.5, "queries": 2, "lines": {}}]'}),
    "scores-empty-line": Case("plot.scores", "--lines {T}/l.json --output {T}/f.png", "{T}/l.json",
                              "an empty line",
                              {"l.json": '[{"label": "A", "overlap": 0.5, "queries": 2, "lines": {"q1": []}}]'}),
    "scores-lines-with-collection-flags": Case("plot.scores", "--lines {T}/l.json --top 5 --output {T}/f.png", "",
                                               "--top does not apply with --lines", {"l.json": "[]"}),
    "tsne-vectors-with-collection-flags": Case("plot.tsne", "--vectors {T}/v.npz --n 5 --output {T}/f.png", "",
                                               "--n does not apply with --vectors"),
    "scores-no-judged-topic": Case("plot.scores", SCORES.replace("{W}/qrels.txt", "{T}/q.txt"), "{T}/q.txt",
                                   "judges no topic", {"q.txt": "q9 0 d1 1\n"}),
    "overlap-missing-curves": Case("plot.overlap", OVERLAP, "{T}/c.json", "no such file"),
    "overlap-malformed-curves": Case("plot.overlap", OVERLAP, "{T}/c.json", "malformed JSON", {"c.json": "{"}),
    "overlap-label-twice": Case("plot.overlap", OVERLAP, "{T}/c.json", "key 'a' is given twice", {"c.json": (
        '{"a": [{"step": 1, "test": "{W}/run.trec", "negatives": "{W}/run2.trec"}], '
        '"a": [{"step": 2, "test": "{W}/run.trec", "negatives": "{W}/run2.trec"}]}')}),
    "overlap-step-twice": Case("plot.overlap", OVERLAP, "{T}/c.json", "a step is listed twice", {"c.json": (
        '{"a": [{"step": 1, "test": "{W}/run.trec", "negatives": "{W}/run2.trec"}, '
        '{"step": 1, "test": "{W}/run.trec", "negatives": "{W}/run2.trec"}]}')}),
    "overlap-missing-run": Case("plot.overlap", OVERLAP, "{T}/nope.trec", "no such file", {"c.json": (
        '{"a": [{"step": 1, "test": "nope.trec", "negatives": "{W}/run2.trec"}]}')}),
    # index.compress, index.rewrite
    "compress-missing-index": Case("index.compress", "--index {T}/nope --output {T}/c", "{T}/nope",
                                   "no such token index folder"),
    "compress-dense-index": Case("index.compress", "--index {W}/dense --output {T}/c", "{W}/dense/meta.json",
                                 "not a token index"),
    "compress-token-record-not-json": Case(
        "index.compress", "--index {T}/tok --output {T}/c", "{T}/tok/meta.json:2", "not valid JSON",
        {"tok": None, "tok/meta.json": '{"index_type": "tokens"\n'}),
    "compress-folder-without-record": Case("index.compress", "--index {T}/tok --output {T}/c", "{T}/tok/meta.json",
                                           "missing: not a token index", {"tok": None}),
    "compress-bits-3": Case("index.compress", "--index {W}/dense --output {T}/c --bits 3", "",
                            "argument --bits: invalid choice"),
    "rewrite-missing-index": Case("index.rewrite", "--index {T}/nope --output {T}/c.jsonl", "{T}/nope",
                                  "no such impact index folder"),
    "rewrite-impact-record-not-json": Case(
        "index.rewrite", "--index {T}/imp --output {T}/c.jsonl", "{T}/imp/meta.json:2",
        "not an impact index record (not valid JSON",
        {"imp": None, "imp/lucene": None, "imp/meta.json": '{"index": "impact"\n'}),
    "rewrite-dense-index": Case("index.rewrite", "--index {W}/dense --output {T}/c.jsonl", "{W}/dense",
                                "not an impact index"),
    "rewrite-output-is-a-folder": Case("index.rewrite", "--index {W}/dense --output {T}/c", "{T}/c", "is a folder",
                                       {"c": None}),
    # an output that is an input, holds one (--force would replace it) or lies inside an input folder
    "bm25-index-output-holds-its-corpus": Case("bm25", "index --corpus {T}/d/c.jsonl --output {T}/d --force", "{T}/d",
                                               "holds the input {T}/d/c.jsonl, which writing it would replace",
                                               {"d": None, "d/c.jsonl": '{"id": "d1", "contents": "a"}\n'}),
    "encode-output-is-its-model": Case("encode", ENCODE.replace("{T}/index", "{W}/model --force"), "{W}/model",
                                       "is the input {W}/model"),
    "encode-output-holds-its-corpus": Case("encode", ENCODE.replace("{W}/corpus.jsonl", "{T}/d/c.jsonl").replace(
        "{T}/index", "{T}/d --force"), "{T}/d", "holds the input {T}/d/c.jsonl",
        {"d": None, "d/c.jsonl": '{"id": "d1", "contents": "a"}\n'}),
    "encode-merge-output-inside-an-input": Case("encode", "merge --inputs {W}/dense --output {W}/dense/m",
                                                "{W}/dense/m", "lies inside the input {W}/dense"),
    "compress-output-inside-the-index": Case("index.compress", "--index {W}/dense --output {W}/dense/c",
                                             "{W}/dense/c", "lies inside the input {W}/dense"),
    "rewrite-output-inside-the-index": Case("index.rewrite", "--index {W}/dense --output {W}/dense/collection/c.jsonl",
                                            "{W}/dense/collection/c.jsonl", "lies inside the input {W}/dense"),
    "average-output-is-a-model": Case("train.average", "--models {W}/model {W}/model16 --output {W}/model --force",
                                      "{W}/model", "is the input {W}/model"),
    "documents-derive-over-its-corpus": Case("documents", "derive --corpus {T}/corpus.jsonl --output {T}",
                                             "{T}/corpus.jsonl", "is the input {T}/corpus.jsonl",
                                             {"corpus.jsonl": SEGMENTS["seg.jsonl"]}),
    "encode-output-is-a-runs-final-model": Case("encode", ENCODE.replace("{W}/model", "{T}/run").replace(
        "{T}/index", "{T}/run/final --force"), "{T}/run/final", "is the input {T}/run/final",
        {"run/checkpoints": None, "run/final": None}),
    "average-output-is-a-runs-final-model": Case("train.average", "--models {T}/run {W}/model --output {T}/run/final "
                                                 "--force", "{T}/run/final", "is the input {T}/run/final",
                                                 {"run/checkpoints": None, "run/final": None}),
    "fusion-output-is-an-input-run": Case("fusion", FUSION.replace("{T}/fused.trec", "{W}/run2.trec"),
                                          "{W}/run2.trec", "is the input {W}/run2.trec"),
    "rerank-output-is-its-run": Case("rerank", RERANK.replace("{T}/ce.trec", "{W}/run.trec"), "{W}/run.trec",
                                     "is the input {W}/run.trec"),
    "negatives-output-is-its-topics": Case("negatives", NEGATIVES.replace("{T}/groups.jsonl", "{W}/topics.tsv"),
                                           "{W}/topics.tsv", "is the input {W}/topics.tsv"),
    "documents-pool-over-its-run": Case("documents", POOL.replace("{T}/p.trec", "{W}/run.trec"), "{W}/run.trec",
                                        "is the input {W}/run.trec"),
    "bm25-search-output-inside-the-index": Case("bm25", BM25_SEARCH.replace("{T}/run.trec", "{W}/lucene/run.trec"),
                                                "{W}/lucene/run.trec", "lies inside the input {W}/lucene"),
    "search-output-is-its-qrels": Case("search", SEARCH.replace("{T}/run.trec", "{W}/qrels.txt --qrels {W}/qrels.txt"),
                                       "{W}/qrels.txt", "is the input {W}/qrels.txt"),
    "pretrain-data-output-is-its-corpus": Case("pretrain_data", "ict --corpus {W}/corpus.jsonl --output "
                                               "{W}/corpus.jsonl", "{W}/corpus.jsonl", "is the input {W}/corpus.jsonl"),
    "documents-split-over-its-corpus": Case("documents", SPLIT.replace("{T}/s.jsonl", "{W}/corpus.jsonl"),
                                            "{W}/corpus.jsonl", "is the input {W}/corpus.jsonl"),
    # datasets
    "datasets-unknown-name": Case("datasets", "fetch nosuch", "", "argument name: invalid choice: 'nosuch'"),
    "datasets-no-command": Case("datasets", "", "", "the following arguments are required"),
}


def _fill(text: str, world: Path, tmp: Path) -> str:
    return text.replace("{W}", str(world)).replace("{F}", str(FILES)).replace("{T}", str(tmp))


def _tree(folder: Path) -> dict[str, int]:
    """Every path under ``folder`` (hidden ones too) with its size (-1 for a folder)."""
    return {str(p.relative_to(folder)): -1 if p.is_dir() else p.stat().st_size for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    """Good inputs: toy corpus/topics/qrels, two runs, tiny models (dense, 16-d, cross-encoder), indexes."""
    import torch
    from transformers import BertConfig, BertModel

    from ance_ir.bm25 import build_lucene_index
    from ance_ir.modeling.kinds import load_model

    root = tmp_path_factory.mktemp("bad-inputs-world")
    (root / "corpus.jsonl").write_text("".join(json.dumps({"id": d, "contents": t}) + "\n"
                                               for d, t in TOY_PASSAGES.items()))
    (root / "topics.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in TOY_TOPICS.items()))
    (root / "qrels.txt").write_text("".join(f"{q} 0 {d} {g}\n" for q, j in TOY_QRELS.items() for d, g in j.items()))
    docs = list(TOY_PASSAGES)
    for name, shift in (("run.trec", 0), ("run2.trec", 3)):
        (root / name).write_text("".join(f"{q} Q0 {docs[(i + shift) % len(docs)]} {i + 1} {10 - i} r\n"
                                         for q in TOY_TOPICS for i in range(5)))
    make_tiny_bert(root / "model")
    small = make_tiny_bert(root / "model16")
    config = BertConfig.from_pretrained(small)
    config.hidden_size, config.intermediate_size = 16, 32
    torch.manual_seed(0)
    BertModel(config).save_pretrained(small)
    torch.manual_seed(0)
    load_model(root / "model", "cross-encoder").save_pretrained(root / "ce")
    load_model(root / "model", "generator").save_pretrained(root / "gen")
    with pytest.raises(SystemExit) as done:
        run_cli(encode_main, ["--corpus", str(root / "corpus.jsonl"), "--encoder", str(root / "model"),
                              "--output", str(root / "dense"), "--quiet", "--device", "cpu"])
    assert done.value.code == 0
    build_lucene_index(root / "corpus.jsonl", root / "lucene", threads=1)
    return root


def test_at_least_60_cases_over_every_cli():
    assert len(CASES) >= 60
    assert {case.cli for case in CASES.values()} == set(MAINS)


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_exit_2_and_nothing_written(name, world, tmp_path, capfd):
    case = CASES[name]
    for rel, content in case.make.items():
        path = tmp_path / rel
        if content is None:
            path.mkdir(parents=True)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(_fill(content, world, tmp_path))
    before, world_before = _tree(tmp_path), _tree(world)
    argv = _fill(case.argv, world, tmp_path).split()
    capfd.readouterr()
    with pytest.raises(SystemExit) as done:
        run_cli(MAINS[case.cli], argv)
    err = capfd.readouterr().err
    assert done.value.code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    where = _fill(case.where, world, tmp_path)
    assert lines[0].startswith(f"error: {where}: " if where else "error: "), lines[0]
    assert _fill(case.what, world, tmp_path) in lines[0]
    assert _tree(tmp_path) == before
    assert _tree(world) == world_before


def _read_all(kind: str, path: Path):
    from ance_ir.data import load_corpus, read_qrels, read_run, read_topics
    from ance_ir.train.arguments import read_config_file

    return {"corpus": load_corpus, "topics": read_topics, "qrels": read_qrels, "run": read_run,
            "config": lambda p: read_config_file(p)[0]}[kind](path)


@pytest.mark.parametrize(("kind", "text", "expected"), [
    ("corpus", '{"id": "d1", "contents": "x"}\n', "d1"),
    ("topics", "q1\tcat\n", "q1"),
    ("qrels", "q1 0 d1 1\n", "q1"),
    ("run", "q1 Q0 d1 1 2.0 r\n", "q1"),
    ("config", "seed: 3\n", "seed"),
])
def test_a_utf8_byte_order_mark_is_not_part_of_the_first_id(tmp_path, kind, text, expected):
    path = tmp_path / f"{kind}.txt"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    data = _read_all(kind, path)
    first = data[0].docid if kind == "corpus" else next(iter(data))
    assert first == expected


def _parsers(monkeypatch) -> dict[str, list]:
    """Every CLI's parser (and its subcommands' parsers), as built by its ``main``."""
    from ance_ir.cli import ArgumentParser

    built: list = []

    def capture(self, args=None, namespace=None):
        built.append(self)
        raise SystemExit(0)

    monkeypatch.setattr(ArgumentParser, "parse_args", capture)
    parsers = {}
    for name, main in MAINS.items():
        built.clear()
        with pytest.raises(SystemExit):
            main([])
        parsers[name] = [built[0], *(p for a in built[0]._actions if a.choices and isinstance(a.choices, dict)
                                     for p in a.choices.values())]
    return parsers


def test_every_help_shows_every_default(monkeypatch):
    import argparse

    from ance_ir.cli import HelpFormatter

    for parsers in _parsers(monkeypatch).values():
        for parser in parsers:
            text = parser.format_help()
            assert "--debug" in text and "--verbose" in text, parser.prog
            for action in parser._actions:
                if action.help == argparse.SUPPRESS:
                    continue
                entry = HelpFormatter(parser.prog)._format_action(action)
                said = " ".join(entry.split())
                assert said.count("(default") <= 1 and "(default: None)" not in said, (parser.prog, said)
                if HelpFormatter._shows_default(action):
                    assert "default" in entry, f"{parser.prog} {action.option_strings}: {entry!r}"
    bm25_search = _parsers(monkeypatch)["bm25"][2].format_help().split("options:", 1)[1]
    for flag in ("--k1 K1", "--b B", "--hits HITS"):
        assert "default" in bm25_search.split(flag, 1)[1].split("\n  --", 1)[0], flag


def test_unexpected_errors_are_one_line_and_debug_shows_the_traceback(world, capfd):
    def broken(argv):
        return 1 / 0

    for argv, traceback in (([], False), (["--debug"], True)):
        with pytest.raises(SystemExit) as done:
            run_cli(broken, argv)
        err = capfd.readouterr().err
        assert done.value.code == 1
        assert ("Traceback (most recent call last)" in err) == traceback
        assert err.strip().splitlines()[-1].startswith("error: ZeroDivisionError: division by zero")
        assert len(err.strip().splitlines()) > 1 if traceback else len(err.strip().splitlines()) == 1
    bad = ["--qrels", str(FILES / "qrels_grade.txt"), "--run", str(world / "run.trec"), "--debug"]
    with pytest.raises(SystemExit) as done:
        run_cli(eval_main, bad)
    err = capfd.readouterr().err.strip().splitlines()
    assert done.value.code == 2 and err[0] == "Traceback (most recent call last):"
    assert err[-1] == f"error: {FILES / 'qrels_grade.txt'}:2: relevance 'high' is not an integer"


def test_an_error_a_library_spreads_over_lines_is_one_line(capfd):
    message = "Couldn't instantiate the backend tokenizer from one of:\n  (1) a `tokenizers` file\n  (2) a slow one\n"
    for error, code, prefix in ((ValueError, 2, "error: "), (SystemError, 1, "error: SystemError: ")):
        def failing(argv, error=error):
            raise error(message)

        with pytest.raises(SystemExit) as done:
            run_cli(failing, [])
        err = capfd.readouterr().err
        assert done.value.code == code and len(err.strip().splitlines()) == 1
        assert err.startswith(f"{prefix}Couldn't instantiate the backend tokenizer from one of: (1) a `tokenizers` "
                              "file (2) a slow one")


def test_bm25_search_prints_no_jvm_warning_unless_verbose(world, tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("ANCE_IR_VERBOSE", None)
    argv = [sys.executable, "-m", "ance_ir.bm25", "search", "--index", str(world / "lucene"), "--topics",
            str(world / "topics.tsv"), "--output", str(tmp_path / "run.trec")]
    quiet = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert quiet.returncode == 0 and quiet.stderr == f"wrote {tmp_path / 'run.trec'}: 3 queries\n"
    verbose = subprocess.run([*argv, "--verbose"], capture_output=True, text=True, env=env)
    assert verbose.returncode == 0 and "WARNING" in verbose.stderr  # what --verbose lets through on this JDK


def test_an_output_that_is_a_symbolic_link_is_the_link_not_its_target(tmp_path):
    """Writing (or with --force replacing) a link replaces the link: a link to the folder of an input is no clash."""
    from ance_ir.cli import check_apart
    from ance_ir.data import InputError

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "c.jsonl").write_text('{"id": "d1", "contents": "a"}\n')
    (tmp_path / "link").symlink_to(tmp_path / "d")
    check_apart(tmp_path / "link", [tmp_path / "d" / "c.jsonl"])
    with pytest.raises(InputError, match="holds the input"):
        check_apart(tmp_path / "d", [tmp_path / "link" / "c.jsonl"])
