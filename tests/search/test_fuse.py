from hydra_rag.search.retrieve import RRF_K, rrf


def test_rrf_scores_and_ranks() -> None:
    fused = rrf({"vector": ["a", "b", "c"], "bm25": ["c", "a"]})
    by_id = {d: (s, r) for d, s, r in fused}
    assert by_id["a"][0] == 1 / (RRF_K + 1) + 1 / (RRF_K + 2)
    assert by_id["c"][1] == {"vector": 3, "bm25": 1}
    assert [d for d, _, _ in fused] == ["a", "c", "b"]


def test_fusion_happens_before_the_cut() -> None:
    # "z" is 2nd in both lists; "x" and "y" are 1st in one list only: z must win.
    fused = rrf({"v": ["x", "z"], "b": ["y", "z"]})
    assert fused[0][0] == "z"


def test_empty_lists() -> None:
    assert rrf({}) == []
    assert rrf({"v": []}) == []


def test_score_fusion_normalises_each_list() -> None:
    from pytest import approx

    from hydra_rag.search.retrieve import score_fusion

    lists = {"vector:m": [("a", 0.9), ("b", 0.5), ("c", 0.1)],
             "bm25": [("c", 30.0), ("a", 20.0), ("d", 10.0)]}
    fused = score_fusion(lists, lambda name, key: 0.5, depth=3)  # full lists
    by = {d: s for d, s, _ in fused}
    # a: vector 1.0, bm25 0.5 → 0.75; c: vector 0, bm25 1 → 0.5; b: 0.25; d: 0
    assert by == approx({"a": 0.75, "c": 0.5, "b": 0.25, "d": 0.0})
    assert fused[0][2] == {"vector:m": 1, "bm25": 2}
    # a BM25 list shorter than the depth holds every match: its floor is 0, not its last entry
    short = {d: s for d, s, _ in score_fusion(lists, lambda name, key: 0.5, depth=100)}
    assert short == approx({"a": 0.5 + 0.5 * 20 / 30, "c": 0.5, "b": 0.25, "d": 0.5 * 10 / 30})
    # the weight decides between lists that disagree
    lean = score_fusion(lists, lambda name, key: 0.9 if name == "bm25" else 0.1)
    assert lean[0][0] == "c"
    assert score_fusion({"v": [("x", 0.3)]}, lambda n, k: 1.0) == [("x", 1.0, {"v": 1})]


def test_dense_weight_rules() -> None:
    from hydra_rag.catalog import Embedder
    from hydra_rag.search.retrieve import (
        CODE_DENSE_WEIGHT,
        DENSE_WEIGHT,
        FOREIGN_DENSE_WEIGHT,
        dense_weight,
        looks_like_code,
    )

    en = Embedder(id="e", dims=4, file="e.gguf")
    anyl = Embedder(id="m", dims=4, file="m.gguf", languages=("*",))
    assert dense_weight("how do I read a file", "prose", "en", en) == DENSE_WEIGHT
    assert dense_weight("how do I read a file", "code", "en", en) == CODE_DENSE_WEIGHT
    assert dense_weight("where is getUserName called", "code", "en", en) == DENSE_WEIGHT
    assert dense_weight("kdo prořezal kdouloň", "prose", "cs", en) == FOREIGN_DENSE_WEIGHT
    assert dense_weight("kdo prořezal kdouloň", "prose", "cs", anyl) == DENSE_WEIGHT
    assert looks_like_code("os.path.join") and looks_like_code("len(x)")
    assert not looks_like_code("python check if a variable is iterable")
    for plain in ("python3 list of APIs, e.g. version 2.0", "convert URLs to IDs"):
        assert not looks_like_code(plain), plain
    assert looks_like_code("what does get_user do") and looks_like_code("where is README.md")
