"""Lexical analysis: identifier splitting, per-language analysis of the full-text index, and the
in-place migration of an index from before the `lex` column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import run_cli, write_tree
from hydra_rag.errors import HydraError
from hydra_rag.store.index_dir import FORMAT_VERSION
from hydra_rag.store.lexical import (
    Analysis,
    detect_language,
    identifier_terms,
    parse_language,
    prefix_stems,
    split_identifier,
)


def test_split_identifier() -> None:
    assert split_identifier("getUserName") == ["get", "user", "name"]
    assert split_identifier("get_user_name") == ["get", "user", "name"]
    assert split_identifier("HTTPServer2") == ["http", "server", "2"]
    assert split_identifier("parseJSONResponse") == ["parse", "json", "response"]
    assert split_identifier("__init__") == ["init"]
    assert split_identifier("APIs") == ["apis"] and split_identifier("parseURLs") == ["parse", "urls"]


@pytest.mark.parametrize(("word", "parts"), [
    ("getÜberName", ["get", "über", "name"]),
    ("größeBerechnen", ["größe", "berechnen"]),
    ("calculerLaDurée", ["calculer", "la", "durée"]),
    ("ИмяПользователя", ["имя", "пользователя"]),
    ("получитьHTTPОтвет", ["получить", "http", "ответ"]),
    ("数据_处理", ["数据", "处理"]),
    ("ΜέγεθοςΑρχείου", ["μέγεθος", "αρχείου"]),
])
def test_split_identifier_beyond_ascii(word: str, parts: list[str]) -> None:
    assert split_identifier(word) == parts


def test_identifier_terms_beyond_ascii() -> None:
    assert identifier_terms("def получитьИмя(): return größe_berechnen").split() == [
        "получить", "имя", "größe", "berechnen", "größeberechnen"]


def test_identifier_terms_keep_parts_and_joined_forms() -> None:
    assert identifier_terms("x = getUserName(a_b)").split() == [
        "get", "user", "name", "a", "b", "ab"]
    assert identifier_terms("plain words only here") == ""
    # dotted and path-like names are split by the full-text tokenizer itself; their camelCase
    # pieces are split here
    assert "parse" in identifier_terms("os.path.join(conf.parseArgs)").split()


def test_prefix_stems_and_query_analysis() -> None:
    assert prefix_stems("momentem ředitelem a") == "momen ředit a"
    cs = Analysis("cs")
    assert cs.mode == "prefix" and cs.fts_options() == {"stem": False, "remove_stop_words": False}
    # full-text syntax characters vanish from a query; words remain
    assert cs.query('ředitel "společnosti" AND (x)') == "ředit spole AND x"
    assert Analysis("de").fts_options()["language"] == "German"
    assert Analysis("zh").mode == "bigram"


def test_words_keep_their_combining_marks() -> None:
    """Tamil, Hindi and vocalised Arabic words stay whole in a query (Python's \\w alone cuts
    them at every vowel sign or virama into pieces no index holds)."""
    assert Analysis("ta").query("பூனைகள் பால் விரும்புகின்றன") == "பூனைகள் பால் விரும்புகின்றன"
    assert Analysis("hi").query("नमस्ते, दुनिया!") == "नमस्त दुनिय"  # 5-character prefix stems
    assert Analysis("ar").query("القِطَطُ؟") == "القِطَطُ"
    assert Analysis("en").query('get_user "name" (x.y)') .split()[:4] == ["get_user", "name", "x", "y"]


# Every language with a LanceDB stemmer: a document word found by a query word.
_SAMPLES = {
    "ar": ("القطط تحب الحليب", "الحليب"), "da": ("katte elsker mælk", "mælk"),
    "nl": ("katten houden van melk", "melk"), "en": ("cats love milk", "milk"),
    "fi": ("kissat rakastavat maitoa", "maitoa"), "fr": ("les chats aiment le lait", "lait"),
    "de": ("Katzen lieben Milch", "Milch"), "el": ("οι γάτες αγαπούν το γάλα", "γάλα"),
    "hu": ("a macskák szeretik a tejet", "tejet"), "it": ("i gatti amano il latte", "latte"),
    "no": ("katter elsker melk", "melk"), "pt": ("os gatos adoram leite", "leite"),
    "ro": ("pisicile iubesc laptele", "laptele"), "ru": ("кошки любят молоко", "молоко"),
    "es": ("los gatos aman la leche", "leche"), "sv": ("katter älskar mjölk", "mjölk"),
    "ta": ("பூனைகள் பால் விரும்புகின்றன", "பால்"), "tr": ("kediler sütü sever", "sütü"),
}


def test_every_stemmed_language_round_trips(tmp_path: Path) -> None:
    import lancedb
    import pyarrow as pa

    from hydra_rag.store.lexical import STEMMED

    assert set(_SAMPLES) == set(STEMMED)
    db = lancedb.connect(str(tmp_path))
    for lang, (text, word) in _SAMPLES.items():
        a = Analysis(lang)
        tbl = db.create_table(lang, pa.table({"lex": [a.document(text), a.document("x y z")]}))
        tbl.create_fts_index("lex", **a.fts_options())
        found = tbl.search(a.query(word), query_type="fts").limit(2).to_list()
        assert [r["lex"] for r in found] == [a.document(text)], lang


def test_parse_and_detect_language() -> None:
    assert parse_language("Czech") == "cs" and parse_language("DE") == "de"
    with pytest.raises(HydraError, match="unknown language"):
        parse_language("Klingon-ish")
    czech = ("Ředitel společnosti oznámil, že nová továrna bude otevřena v příštím roce. "
             "Zaměstnanci budou mít lepší podmínky a vyšší platy než dosud. ") * 3
    german = ("Der Vorstand hat beschlossen, dass die neue Fabrik im nächsten Jahr eröffnet "
              "wird. Die Mitarbeiter bekommen bessere Bedingungen als bisher. ") * 3
    assert detect_language([czech]) == "cs"
    assert detect_language([german]) == "de"
    assert detect_language(["too short"]) == "en"


def _bm25(folder: Path, query: str, k: int = 3) -> list[str]:
    proc = run_cli("search", query, "--path", str(folder), "--mode", "bm25", "--json", "-k", str(k))
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    # one method alone: results in that list's own order, across code and prose alike
    assert [r["ranks"]["bm25"] for r in results] == list(range(1, len(results) + 1))
    return [r["path"] for r in results]


def test_identifiers_match_the_way_people_type_them(isolated_home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "code", {
        "users.py": "def getUserName(uid):\n    return fetch_account_row(uid).label\n",
        "billing.py": "def monthly_invoice(customer):\n    return customer.total * 12\n",
        "notes.md": "# Notes\n\nThe name of the game is patience.\n",
    })
    assert run_cli("index", str(root)).returncode == 0
    assert _bm25(root, "user name")[0] == "users.py"
    assert _bm25(root, "get_user_name")[0] == "users.py"        # snake_case → camelCase
    assert _bm25(root, "fetchAccountRow")[0] == "users.py"      # camelCase → snake_case
    assert _bm25(root, "monthly invoice")[0] == "billing.py"
    assert _bm25(root, "(((") == []  # nothing searchable: no results, no error


def test_czech_folder_gets_prefix_stems(isolated_home: Path, tmp_path: Path) -> None:
    root = write_tree(tmp_path / "cz", {
        "porada.md": "# Porada\n\nSetkání s ředitelem společnosti proběhlo v pondělí ráno. "
                     "Projednali jsme rozpočet na příští rok a nové zaměstnance.\n",
        "vylet.md": "# Výlet\n\nV sobotu jsme jeli na hory, počasí bylo krásné a sníh čerstvý. "
                    "Děti si stavěly sněhuláka a večer jsme hráli karty.\n",
        "kuchyne.md": "# Kuchyně\n\nNa oběd byla svíčková s knedlíkem a k večeři polévka. "
                      "Recept na koláč mi dala babička už před lety.\n",
    })
    proc = run_cli("index", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["languages"]["prose"] == "cs"
    meta = yaml.safe_load((root / ".hydra-index" / "meta.yaml").read_text())
    assert meta["lexical"]["prose"]["mode"] == "prefix"
    # "ředitel společnost" never occurs as such: the text says "ředitelem společnosti"
    assert _bm25(root, "ředitel společnost")[0] == "porada.md"
    assert _bm25(root, "reditel spolecnost")[0] == "porada.md"  # typed without diacritics


def test_language_flag_and_migration_never_reembed(isolated_home: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # A language the embedder does not know would switch the prose embedder (test_multilingual)
    monkeypatch.setenv("HYDRA_RAG_FOREIGN_EMBEDDER", "off")
    import lancedb

    root = write_tree(tmp_path / "en", {
        "users.py": "def getUserName(user_id):\n    return lookup(user_id)\n",
        "a.md": "# Gardening\n\nTomatoes need full sun and deep, regular watering in summer.\n",
    })
    assert run_cli("index", str(root)).returncode == 0
    # Make it an index from before the `lex` column: format 1, no lexical record, no column.
    idx = root / ".hydra-index"
    meta = yaml.safe_load((idx / "meta.yaml").read_text())
    meta["format_version"] = 1
    del meta["lexical"]
    (idx / "meta.yaml").write_text(yaml.safe_dump(meta))
    db = lancedb.connect(str(idx / "lance"))
    for t in ("code", "prose"):
        tbl = db.open_table(t)
        data = tbl.to_arrow().drop_columns(["lex"])
        new = db.create_table(t, data=data, mode="overwrite")
        new.create_fts_index("text", replace=True, with_position=False)
    proc = run_cli("index", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["chunks_added"] == 0 and not report["rebuilt"]
    assert len(report["notes"]) == 2 and "no chunk was re-embedded" in report["notes"][0]
    assert yaml.safe_load((idx / "meta.yaml").read_text())["format_version"] == FORMAT_VERSION
    assert _bm25(root, "user name")[0] == "users.py"

    proc = run_cli("index", str(root), "--language", "cs", "--json")
    report = json.loads(proc.stdout)
    assert report["languages"]["prose"] == "cs" and report["chunks_added"] == 0
    assert "language cs (was en)" in report["notes"][0]
    assert run_cli("index", str(root), "--json").stdout.count("re-embedded") == 0  # kept
    proc = run_cli("index", str(root), "--language", "xx-nope")
    assert proc.returncode == 1 and "unknown language" in proc.stderr
    # a typo next to --full fails before the rebuild drops anything
    proc = run_cli("index", str(root), "--full", "--language", "polsih")
    assert proc.returncode == 1 and "unknown language" in proc.stderr
    rep = json.loads(run_cli("index", str(root), "--json").stdout)
    assert (rep["rebuilt"], rep["files_unchanged"]) == (False, 2)


def test_one_method_alone_keeps_its_own_order(isolated_home: Path, tmp_path: Path) -> None:
    # A plain-language query weights code and prose differently when fusing; with one method
    # alone no such weight may reorder the list.
    root = write_tree(tmp_path / "mixed", {
        "billing.py": "def invoice(invoice):\n    # invoice invoice invoice\n    return invoice\n",
        "util.py": "def add(a, b):\n    return a + b\n",
        "notes.md": "# Notes\n\nSend the invoice on Monday, after the weekly meeting with the "
                    "whole team, the visitors from the north office and the new accountant.\n",
        "other.md": "# Other\n\nThe weekly meeting is on Monday.\n",
    })
    assert run_cli("index", str(root)).returncode == 0
    # (_bm25 checks that the results come in the BM25 list's own order)
    assert set(_bm25(root, "invoice")[:2]) == {"billing.py", "notes.md"}
    for query in ("weekly meeting on Monday", "add two numbers", "send the invoice"):
        proc = run_cli("search", query, "--path", str(root), "--mode", "vector", "--json")
        ranks = [r["ranks"]["vector:minilm-l6"] for r in json.loads(proc.stdout)["results"]]
        assert ranks == list(range(1, 5)), query


def test_ascii_patterns_match_the_unicode_ones_on_ascii_text() -> None:
    """The ASCII fast path splits and finds words exactly as the full patterns do."""
    import random
    import string

    from hydra_rag.store import lexical

    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits + "_ .-"
    words = ["getUserName", "HTTPServer2", "URLs", "XMLHttpRequests", "parseHTTPSURLs", "ABCs"]
    words += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 16))) for _ in range(3000)]
    for w in words:
        assert lexical._ASCII_PART.findall(w) == lexical._part().findall(w), w
        assert lexical._ASCII_WORD.findall(w) == lexical._word().findall(w), w
    assert lexical.split_identifier("getHTTPResponse_code") == ["get", "http", "response", "code"]
