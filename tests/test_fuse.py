from hydra_rag.retrieve import RRF_K, rrf


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
