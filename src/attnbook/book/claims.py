"""The numbers the prose reports, and where the outputs print them.

A chapter's markdown says what its cells print: a figure in the text (a number
with a decimal point, a percentage, a ratio "N times" or "N×", a count written
with thousands separators, "18.9 M") must appear in a stored output of the same
notebook above the sentence, or in the outputs right below it when the sentence
points there ("the table below"), at the precision the prose uses: "3.8" is
found in a printed "3.84", "75%" in "75.3%" or in "0.753", "63 M" in
"63,082,496". The exceptions:

- a sentence that carries a citation (``{cite}``...): the figure is the paper's;
- a number the cell declares in its metadata as a definition or a constant of
  the setup, with the reason: ``"claims": {"0.98": "Adam's beta2 in the paper's
  recipe"}``; or a number written verbatim in a code cell above (a setting the
  reader sees in the code), reported apart;
- on a book page, a figure recorded in a results file that the page names
  (a script's run with the machine it ran on, under ``book/results/``), or a
  constant it declares (see :data:`PAGE_NOTE`);
- code spans, math, links and the inside of exercise statements, which pose
  tasks rather than report results.

Three more kinds of claim are held to their evidence:

- **A quote from another document.** A figure or a setting taken from another
  chapter, page or recorded run names its source: ``"quotes": {"57.2%":
  "notebooks/03_attention.ipynb"}`` in the cell's metadata, or ``% quotes:
  "57.2%" notebooks/03_attention.ipynb`` on a page. The quote is checked against
  that source only: its stored outputs, the figures of a recorded run
  (``book/results/*.json``), or, with ``path:NAME``, the setting ``NAME`` that
  a notebook's code assigns (``"four epochs": "notebooks/03_attention.ipynb:EPOCHS"``).
  Re-executing the source fails every stale quote of it. A figure in a sentence
  that names another chapter and that no cell above prints must be declared so.
  A ``path:NAME`` that the notebook does not assign is looked up where its code passes
  it: a keyword argument (``lr=3e-3``), a parameter's default, or the one argument of a
  call of ``NAME`` (``torch.set_num_threads(1)``); the quoted value must be one it gives.
  A quote may name several sources (a JSON list; on a page, one line each).
  A recorded run that says which notebook's settings it ran (``"notebook"`` and
  ``"settings"`` side by side in its JSON) fails every page or cell that quotes
  it once that notebook assigns other settings.
- **A setting said to be another chapter's.** A sentence that attributes something to
  another chapter ("as in chapters 5 and 6", "the same four heads as chapter 5", "like
  chapter 7's warm-up of 4,000 steps", "chapter 3's model and recipe", "the same four
  epochs") and holds a setting (a number with a word that makes it one: "four epochs",
  "width 32", "a learning rate of $10^{-3}$", "batches of 64") declares each setting: as
  a quote of every chapter it is attributed to, checked against that chapter's code
  (``"learning rate of $10^{-3}$": ["notebooks/05_multihead_attention.ipynb:lr", ...]``),
  or in ``"claims"`` as the sentence's own setting, with the reason. A sentence that only
  points at a chapter ("the decoder's mask, chapter 5") attributes nothing to it.
- **A word of ordering or growth** (faster, slower, grows linearly, quadratic
  in, about the same, within N×, the most, the least): the cells above it in
  its section, or right below it when the sentence points there, print the
  comparison with a word of the same kind (a verdict computed from the
  numbers, "slope", "linear", "faster"...); a chapter's summary may point at
  anything printed above it; on a page, the sources it names do.
  A sentence with a citation is the paper's; an exercise's statement and its
  solution's prose pose and argue rather than report, and are not checked for
  these words; an argument rather than a measurement is declared with its
  reason, like a constant
  (``"claims": {"grows linearly": "a count of multiplications, not a measurement"}``).

``python -m attnbook.book.claims`` lists every claim that no output supports, notebook
by notebook; ``tests/test_claims.py`` fails on any.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from attnbook.book.config import book_root

ROOT = book_root(Path(__file__))  # the repository this module is in, whatever the working folder
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def read_notebook(path: Path):
    import nbformat

    return nbformat.read(path, as_version=4)


#: Book pages that quote results; their figures are looked up in the sources each page names (PAGE_NOTE).
PAGES = sorted((ROOT / "book").glob("*.md"))

MINUS = "−"
_NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+|\d+"
#: A figure in prose: sign, number, then an optional unit that changes how it is matched.
PROSE = re.compile(
    rf"(?<![\w.,/#=-])(?P<sign>[-{MINUS}])?(?P<num>{_NUMBER})"
    r"(?:(?P<range>\s*[–-]\s*(?:\d+(?:\.\d+)?))?)"
    r"(?P<unit>\s?%|\s?×|\s?times\b|\s?M\b|\s?k\b)?"
    r"(?![\w.]\d|\.\d|[\w])"
)
#: Every number in an output.
PRINTED = re.compile(r"(?<![\w.])[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?")
#: Words after which a number is a name, not a figure: "chapter 8", "Table 3", "Python 3.11".
NAMING = re.compile(
    r"(chapters?|sections?|tables?|figures?|fig\.|eq\.|equations?|exercises?|python|pytorch|torch|version|v|"
    r"step|steps|layer|layers|head|heads|epoch|epochs|row|rows|column|columns|cell|cells|part|appendix|"
    r"line|lines|page|issue|#)\s*$",
    re.IGNORECASE,
)
CITATION = re.compile(r"\{cite(?::[a-z]+)?\}")
_STRIP = [
    re.compile(r"\$\$.*?\$\$", re.DOTALL),
    re.compile(r"(?<!\\)\$[^$]+?(?<!\\)\$"),
    re.compile(r"`[^`]*`"),
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"<[^>\n]+>"),  # HTML tags
    re.compile(r"\{[a-z:]+\}`[^`]*`"),  # roles: {cite}`...`, {ref}`...`
]
#: Code shown in the text. A fence with no language, or ``text``, holds a typed output: its figures are claims too.
_CODE_BLOCK = re.compile(
    r"^(`{3,}|~{3,})(?!\{)(?!\s*(?:text|console)?\s*$)[^\n]*\n.*?^\1\s*$", re.DOTALL | re.MULTILINE
)
_EXERCISE = re.compile(r"(`{3,4})\{exercise\}.*?\n\1", re.DOTALL)


@dataclass
class Claim:
    where: str  # "notebooks/07_transformer.ipynb, cell 41" or "book/benchmarks.md"
    text: str  # the figure as written
    value: float
    decimals: int
    kind: str  # "number", "percent", "ratio", "million", "thousand"
    sentence: str
    note: str = ""  # why it failed, where the figure alone does not say

    def __str__(self) -> str:
        note = f" ({self.note})" if self.note else ""
        return f"{self.where}: {self.text!r} in “{_shorten(self.sentence)}”{note}"


@dataclass
class Report:
    checked: list[Claim] = field(default_factory=list)
    unsupported: list[Claim] = field(default_factory=list)
    from_code: list[Claim] = field(default_factory=list)
    declared: list[Claim] = field(default_factory=list)
    cited: list[Claim] = field(default_factory=list)
    quoted: list[Claim] = field(default_factory=list)  # figures quoted from another document, checked there
    orderings: list[Claim] = field(default_factory=list)  # words of ordering or growth, checked against outputs
    problems: list[str] = field(default_factory=list)  # stale quotes and records
    quotes: list[str] = field(
        default_factory=list
    )  # every declared quote, "text <- source", each checked at its source

    @property
    def failures(self) -> list[str]:
        return [str(c) for c in self.unsupported] + self.problems


def _shorten(text: str, limit: int = 140) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: Chinese characters and full-width punctuation: the Chinese edition writes "为 57.2%" or "为57.2%" alike.
_CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"
_CJK_TEXT = re.compile(f"[{_CJK}]")
_CJK_NEXT_TO_FIGURE = re.compile(rf"(?<=[{_CJK}])(?=[-−\d])|(?<=[\d%×])(?=[{_CJK}])")


def prose_of(markdown: str, math: bool = False) -> str:
    """The running text of a markdown cell: no code, math, links, tags, roles or exercise statements.

    A Chinese character or full-width mark beside a figure is set apart by a space, as a word would be.
    With ``math``, inline math stays, written out as plain text (:func:`plain_math`): a setting such as
    "a learning rate of $10^{-3}$" is read as "a learning rate of 1e-3".
    """
    text = _CJK_NEXT_TO_FIGURE.sub(" ", markdown)
    if math:
        text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.DOTALL)
        text = re.sub(r"(?<!\\)\$([^$]+?)(?<!\\)\$", lambda m: plain_math(m.group(1)), text)
    text = _EXERCISE.sub(" ", text)
    text = _CODE_BLOCK.sub(" ", text)  # code shown in the text (not a directive: those fences hold prose)
    text = re.sub(
        r"^(`{3,4})\{[a-z-]+\}[^\n]*\n(?::[a-z-]+:[^\n]*\n)*", " ", text, flags=re.MULTILINE
    )  # directive heads
    text = re.sub(r"^(`{3,4}|~{3,4})\s*(text|console)?\s*$", " ", text, flags=re.MULTILINE)
    for pattern in _STRIP[2:] if math else _STRIP:
        text = pattern.sub(" ", text)
    return text


def plain_math(math: str) -> str:
    """Inline math as plain text: ``5 \\times 10^{-3}`` -> ``5e-3``, ``d_\\text{model} = 64`` -> ``d_model = 64``."""
    text = re.sub(r"(\d+(?:\.\d+)?)\s*\\(?:times|cdot)\s*10\^\{?(-?\d+)\}?", r"\1e\2", math)
    text = re.sub(r"(?<![\d.])10\^\{?(-?\d+)\}?", r"1e\1", text)
    text = re.sub(r"\\(?:text|mathrm|operatorname)\{([^}]*)\}", r"\1", text)
    text = re.sub(r"\\([a-zA-Z]+)", r"\1", text)
    return " " + re.sub(r"[{}]", "", text) + " "


def sentences(text: str) -> list[str]:
    """Sentences, list items and table rows: a citation exempts only the figures of its own sentence."""
    ends = r"(?<=[.!?:;])\)?\s+(?=[A-Z(*\"“\x00])|(?<=\.\))\s+|(?<=[。！？])\s*"
    return [s for s in re.split(ends + r"|\n\s*\n|\n\s*[-*]\s+|\n\|", text) if s and s.strip()]


def claims_in(markdown: str, where: str) -> tuple[list[Claim], list[Claim]]:
    """(claims to check, claims that carry a citation) in one markdown cell."""
    found, cited = [], []
    for sentence in sentences(prose_of(_keep_citations(markdown))):
        has_citation = "\x00CITE" in sentence
        for m in PROSE.finditer(sentence):
            if NAMING.search(sentence[: m.start()]):
                continue
            unit = (m.group("unit") or "").strip()
            num = m.group("num")
            is_figure = "." in num or "," in num or unit
            if not is_figure:
                continue
            for part in _parts(m):
                value = float(part.replace(",", "")) * (-1 if m.group("sign") else 1)
                decimals = len(part.split(".")[1]) if "." in part else 0
                kind = {"%": "percent", "×": "ratio", "times": "ratio", "M": "million", "k": "thousand"}.get(
                    unit, "number"
                )
                claim = Claim(
                    where, " ".join(m.group(0).split()), value, decimals, kind, sentence.replace("\x00CITE", "{cite}")
                )
                (cited if has_citation else found).append(claim)
        for m in WORD_RATIO.finditer(sentence):
            value = float(WORDS[m.group("word").lower()]) if m.group("word") else 2.0
            kind = "approximate ratio" if m.group("approx") else "ratio"
            claim = Claim(where, " ".join(m.group(0).split()), value, 0, kind, sentence.replace("\x00CITE", "{cite}"))
            (cited if has_citation else found).append(claim)
    return found, cited


WORDS = {
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "hundred": 100,
}
#: "three times", "ten times faster", "twice": a ratio in words; "about"/"some"/"nearly" before it make it approximate.
WORD_RATIO = re.compile(
    r"(?P<approx>\b(?:about|some|nearly|roughly|almost|around)\s+)?\b(?P<word>"
    + "|".join(WORDS)
    + r")\s+times\b|\btwice\b",
    re.IGNORECASE,
)
#: How far an approximate ratio in words may be from the printed one, relative.
APPROXIMATE = 0.15

#: Words of ordering or growth, by kind, and what an output must print to support a word of that kind.
ORDERING = re.compile(
    r"\b(?P<word>faster|slower|(?:fastest|slowest)(?!\s+(?:of\s+\w+\s+)?(?:runs?|rounds?)\b)|(?:grows?|growing)\s+(?:linearly|quadratically|as\s+N)|"
    r"linearly|quadratically|linear\s+in|quadratic\s+in|about\s+the\s+same|within\s+(?:[\d.]+\s?(?:×|times\b)|(?:a\s+)?factor|(?:two|three|four|five|ten)\s+times)|"
    r"the\s+most|the\s+least)(?!\w)"
    r"(?!\s+(?:likely|probable|negative|positive|recent)\b)",  # "the most likely token" ranks, it compares no results
    re.IGNORECASE,
)
ORDERING_EVIDENCE = {
    "speed": re.compile(r"\b(faster|slower|fastest|slowest)\b", re.IGNORECASE),
    "growth": re.compile(r"\b(slope|linear|linearly|quadratic|quadratically|grows?)\b", re.IGNORECASE),
    "same": re.compile(r"\babout the same\b", re.IGNORECASE),
    "within": re.compile(r"\bwithin\b", re.IGNORECASE),
    "extreme": re.compile(
        r"\b(most|least|highest|lowest|largest|smallest|best|worst|fastest|slowest)\b", re.IGNORECASE
    ),
}


def ordering_kind(word: str) -> str:
    word = " ".join(word.lower().split())
    if word in ("faster", "slower", "fastest", "slowest"):
        return "speed"
    if word == "about the same":
        return "same"
    if word.startswith("within"):
        return "within"
    if word in ("the most", "the least"):
        return "extreme"
    return "growth"


def orderings_in(markdown: str, where: str) -> tuple[list[Claim], list[Claim]]:
    """(words of ordering or growth to check, those in a sentence with a citation) in one markdown cell."""
    found, cited = [], []
    for sentence in sentences(prose_of(_keep_citations(markdown))):
        for m in ORDERING.finditer(sentence):
            word = " ".join(m.group("word").split())
            claim = Claim(where, word, 0.0, 0, ordering_kind(word), sentence.replace("\x00CITE", "{cite}"))
            (cited if "\x00CITE" in sentence else found).append(claim)
    return found, cited


def ordering_supported(claim: Claim, evidence: str) -> bool:
    return bool(ORDERING_EVIDENCE[claim.kind].search(evidence))


# --- quotes of other documents ---------------------------------------------------------------

#: "chapter 3", "chapter 3's", "chapters 3 and 5": a sentence that names another chapter.
NAMES_CHAPTER = re.compile(r"\bchapters?\s+(\d+)(?:\s*(?:,|and|or)\s*(\d+))*", re.IGNORECASE)


def chapters_named(sentence: str) -> set[int]:
    named = set()
    for m in NAMES_CHAPTER.finditer(sentence):
        named |= {int(n) for n in re.findall(r"\d+", m.group(0))}
    return named


# --- settings quoted from another chapter ---------------------------------------------------

_SETTING_NUMBER = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e-?\d+)?|(?:" + "|".join(["one", *WORDS]) + r")\b"
#: A setting in prose (math written out by :func:`plain_math`): a number bound to a word that makes it a setting,
#: "four epochs", "2 decoder layers", "3 to 25 tokens", "64-dimensional", "width 32", "a learning rate of 1e-3",
#: "Adam at 5e-3", "batches of 64", "d_model = 64". "one token at a time" is a manner, not a setting.
SETTING = re.compile(
    rf"(?<![\w.,])(?:(?:{_SETTING_NUMBER})\s*(?:to|–|-)\s*)?(?:{_SETTING_NUMBER})"
    r"(?:-dimensional\b|(?:\s+[\w-]+){0,2}?\s+(?:epochs?|layers?|heads?|threads?|steps?|seeds?|checkpoints?)\b"
    r"|\s+(?:tokens?|pairs?|sentences?)\b)(?![\w\s]*\bat\s+a\s+time\b)"
    r"|\b(?:width|(?:learning\s+)?rate\s+of|learning\s+rate|Adam\s+at|batch(?:es)?\s+of|batch\s+size(?:\s+of)?|"
    r"dropout(?:\s+of)?|warm-up\s+of|peak\s+of|seed|beam\s+of|d_model\s*=|d_ff\s*=|h\s*=|P_drop\s*=|beta_2\s*=)"
    rf"\s+(?:{_SETTING_NUMBER})(?![\w.]\d|\w)",
    re.IGNORECASE,
)
_CHAPTERS = r"chapters?\s+\d+(?:\s*(?:,|and|or)\s*\d+)*"
#: What attributes a setting to another chapter: "as in chapters 5 and 6", "the same four heads as chapter 5",
#: "like chapter 7's warm-up of 4,000 steps", "two fewer than in chapter 2", "chapter 3's model and recipe",
#: "the sizes of chapter 3", "Chapter 3 trains four epochs".
QUOTES_A_CHAPTER = re.compile(
    rf"\b(?:as|than|like)\s+(?:in\s+)?{_CHAPTERS}"
    rf"|\b{_CHAPTERS}'s\s+(?:[\w-]+\s+){{0,3}}?(?:recipe|settings|sizes|configuration|hyperparameters)\b"
    rf"|\b(?:recipe|settings|sizes|configuration|hyperparameters)\s+of\s+{_CHAPTERS}"
    rf"|\b{_CHAPTERS}\s+(?:trains?|trained|uses?|used|keeps?|kept|sets?|averages?|averaged|runs?|ran)\b",
    re.IGNORECASE,
)
#: "the same four epochs", "the same budget of four epochs": a setting said to be another chapter's.
_THE_SAME = re.compile(r"\bthe\s+same\s+(?:[\w-]+\s+){0,3}$", re.IGNORECASE)


def setting_quotes_in(markdown: str, where: str, own: int | None) -> list[Claim]:
    """The settings a markdown cell or page attributes to another chapter, each with the chapters it names.

    A sentence that names a chapter other than its own, in words that attribute something to it
    (:data:`QUOTES_A_CHAPTER`, or "the same" before the setting), quotes that chapter: each setting in it
    (:data:`SETTING`) is either declared as a quote of that chapter's code (``path:NAME``) or declared as
    the sentence's own setting, with the reason. A sentence that only points at a chapter ("the decoder's
    mask, chapter 5") quotes nothing; a sentence with a citation gives the paper's settings.
    """
    found = []
    for sentence in sentences(prose_of(_keep_citations(markdown), math=True)):
        if "\x00CITE" in sentence or not chapters_named(sentence) - {own}:
            continue
        for clause in sentence.split(";"):  # "...at chapter 8's configuration; generating 64 tokens...": two claims
            found += _attributed_settings(clause, where, own)
    return found


def _attributed_settings(sentence: str, where: str, own: int | None) -> list[Claim]:
    found = []
    if not chapters_named(sentence) - {own}:
        return found
    constructions = [
        (m.start(), m.end(), chapters_named(m.group(0)) - {own})
        for m in QUOTES_A_CHAPTER.finditer(sentence)
        if chapters_named(m.group(0)) - {own}
    ]
    # a chapter's own number is no setting: "Chapter 3 trains four epochs" holds one, "four epochs"
    masked = NAMES_CHAPTER.sub(lambda m: re.sub(r"\d", "#", m.group(0)), sentence)
    for m in SETTING.finditer(masked):
        if constructions:  # the setting belongs to the nearest words that attribute something to a chapter
            chapters = min(constructions, key=lambda c: max(c[0] - m.end(), m.start() - c[1], 0))[2]
        elif _THE_SAME.search(masked[: m.start()]):
            chapters = chapters_named(sentence) - {own}
        else:
            continue
        text = " ".join(m.group(0).split())
        found.append(Claim(where, text, 0.0, 0, "setting", sentence, note=",".join(map(str, sorted(chapters)))))
    return found


def _covers(key: str, setting: str) -> bool:
    """Does a declaration's text (math written out) cover a setting found in prose, or the setting cover it?"""
    key = " ".join(prose_of(key, math=True).split())
    if not key:
        return False
    edge = r"(?<![\w.,]){}(?![\w]|[.,]\d)"
    return bool(re.search(edge.format(re.escape(key)), setting) or re.search(edge.format(re.escape(setting)), key))


def _file_settings(report: Report, settings: list[Claim], quotes: dict[str, list[str]], declared: set[str]) -> None:
    """File each setting quoted from another chapter: declared a quote of a chapter it names, declared, or not."""
    for claim in settings:
        chapters = {int(c) for c in claim.note.split(",") if c}
        claim.note = ""
        covering = [key for key in quotes if _covers(key, claim.text)]
        if covering:
            report.quoted.append(claim)
            sources = [s for key in covering for s in quotes[key]]
            checked = {_own_chapter(Path(s.split(":")[0])) for s in sources}
            if None not in checked and chapters - checked:
                report.problems.append(
                    f"{claim.where}: {claim.text!r} is said to be {_chapters(chapters)}'s "
                    f"(“{_shorten(claim.sentence, 100)}”), and its quote checks it against {', '.join(sources)} only"
                )
        elif any(_covers(key, claim.text) for key in declared):
            report.declared.append(claim)
        else:
            claim.note = (
                f"a setting said to be {_chapters(chapters)}'s: declare it in \"quotes\" as that notebook's "
                'NOTEBOOK:NAME, or in "claims" as this chapter\'s own with the reason'
            )
            report.unsupported.append(claim)


def _chapters(numbers: set[int]) -> str:
    """{5} -> "chapter 5", {5, 6} -> "chapters 5 and 6"."""
    ordered = [str(n) for n in sorted(numbers)]
    if len(ordered) == 1:
        return f"chapter {ordered[0]}"
    return f"chapters {', '.join(ordered[:-1])} and {ordered[-1]}"


def _setting_value(text: str) -> float | None:
    """The one number a quoted setting names ("four epochs", "$5 \\times 10^{-3}$", "64-dimensional"), or None."""
    plain = prose_of(text, math=True)
    numbers = [m.group(0) for m in re.finditer(rf"(?<![\w.,])(?:{_SETTING_NUMBER})", plain, re.IGNORECASE)]
    if len(numbers) != 1:
        return None
    number = numbers[0].lower()
    return float(WORDS.get(number, 1 if number == "one" else 0)) if number.isalpha() else float(number.replace(",", ""))


def _literal_without_full_run(node):
    """A literal node's value, as it is with FULL_RUN off (``a if FULL_RUN else b`` is ``b``)."""
    import ast

    if isinstance(node, ast.IfExp) and "FULL_RUN" in ast.unparse(node.test):
        return _literal_without_full_run(node.orelse)
    return ast.literal_eval(node)


def _code_cell_trees(path: Path):
    """The syntax tree of each code cell of a notebook (IPython's syntax turned into Python; cells that still do
    not parse are left out)."""
    import ast

    from IPython.core.inputtransformer2 import TransformerManager

    for cell in read_notebook(path).cells:
        if cell.cell_type != "code":
            continue
        try:
            yield ast.parse(TransformerManager().transform_cell(cell.source))
        except SyntaxError:
            continue


def setting_values(path: Path, name: str) -> tuple[str, list]:
    """What a notebook's code gives the setting ``name``: ("assigns", [value]) for a constant it assigns at the
    top level of a cell (as with FULL_RUN off), else ("passes", values) for every literal it passes as the
    keyword argument ``name=``, gives a parameter ``name`` as its default, or passes to a call of ``name(...)``
    as its one argument (``torch.set_num_threads(1)``)."""
    import ast

    assigned = notebook_settings(path)
    if name in assigned:
        return "assigns", [assigned[name]]
    literal = _literal_without_full_run

    given = []
    for tree in _code_cell_trees(path):
        for node in ast.walk(tree):
            nodes = []
            if isinstance(node, ast.Call):
                nodes += [k.value for k in node.keywords if k.arg == name]
                called = getattr(node.func, "attr", getattr(node.func, "id", None))
                if called == name and len(node.args) == 1 and not node.keywords:
                    nodes.append(node.args[0])
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                arguments = node.args
                positional = arguments.posonlyargs + arguments.args
                nodes += [
                    d
                    for a, d in zip(positional[len(positional) - len(arguments.defaults) :], arguments.defaults)
                    if a.arg == name
                ]
                nodes += [d for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if a.arg == name and d]
            for value in nodes:
                try:
                    given.append(literal(value))
                except (ValueError, TypeError, SyntaxError):
                    continue
    return "passes", given


def _check_setting_quote(text: str, path: str, name: str, where: str) -> str | None:
    quoted = _setting_value(text)
    if quoted is None:
        return f"{where}: a quote of a setting names one number, and {text!r} does not"
    how, values = setting_values(ROOT / path, name)
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if how == "assigns":
        if not numbers or float(numbers[0]) != quoted:
            return f"{where}: quotes {text!r} as {path}'s {name}, which its code now sets to {values[0]!r}"
        return None
    if not values:
        return f"{where}: quotes the setting {name} of {path}, which its code no longer assigns or passes"
    if quoted not in {float(v) for v in numbers}:
        return (
            f"{where}: quotes {text!r} as {path}'s {name}, which its code never gives that value "
            f"(it gives {', '.join(sorted({repr(v) for v in values}))})"
        )
    return None


def notebook_settings(path: Path) -> dict[str, object]:
    """The constants a notebook's code assigns at the top level of a cell, as they are with FULL_RUN off.

    ``EPOCHS = 4``, ``N_PAIRS, MAX_LEN = (20_000, 40) if FULL_RUN else (4_000, 25)``: literals only.
    """
    import ast

    value = _literal_without_full_run
    settings: dict[str, object] = {}
    for tree in _code_cell_trees(path):
        for node in tree.body:
            if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                continue
            target = node.targets[0]
            try:
                assigned = value(node.value)
            except (ValueError, TypeError, SyntaxError):
                continue
            if isinstance(target, ast.Name):
                settings[target.id] = assigned
            elif isinstance(target, ast.Tuple) and isinstance(assigned, tuple) and len(assigned) == len(target.elts):
                for element, v in zip(target.elts, assigned):
                    if isinstance(element, ast.Name):
                        settings[element.id] = v
    return settings


def recorded_settings(record: Path) -> list[tuple[str, dict]]:
    """(notebook, settings) for every part of a recorded run that says which notebook's settings it ran."""
    import json

    found = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("notebook"), str) and isinstance(node.get("settings"), dict):
                found.append((node["notebook"], node["settings"]))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads(record.read_text(encoding="utf-8")))
    return found


def stale_settings(record: Path) -> list[str]:
    """What a recorded run says it ran that its notebook no longer assigns."""
    problems = []
    for notebook, settings in recorded_settings(record):
        path = ROOT / notebook
        if not path.is_file():
            problems.append(f"{record.relative_to(ROOT)} measured {notebook}, which no longer exists")
            continue
        now = notebook_settings(path)
        for name, then in settings.items():
            if now.get(name) != then:
                problems.append(
                    f"{record.relative_to(ROOT)} measured {notebook} with {name} = {then!r}; "
                    f"the notebook now assigns {now.get(name, 'nothing')!r}: run the record's command again"
                )
    return problems


def source_numbers(source: str) -> list[tuple[float, int]]:
    """The figures a quote may be checked against: a notebook's stored outputs, a record's or page's text."""
    path = ROOT / source
    if not path.is_file():
        raise FileNotFoundError(f"a quote names {source} as its source, and there is no such file")
    if path.suffix == ".ipynb":
        return _outputs_of(path)
    return printed_numbers(path.read_text(encoding="utf-8"))


def check_quote(text: str, source: str, where: str, prose: str) -> str | None:
    """None if the quoted figure is what its source prints (or the setting it assigns); else why not."""
    flat = " ".join(prose.split())
    # In the Chinese edition the words of a quote are translated; its figure, if it has one, is not.
    present = text in flat or (
        "$" in text and " ".join(prose_of(text, math=True).split()) in flat
    )  # a setting written in math: the prose passed in holds its math written out too (prose_of(..., math=True))
    if not present and _CJK_TEXT.search(flat):
        figure = re.search(r"\d[\d,]*(?:\.\d+)?%?", text)
        present = figure is None or figure.group(0) in flat
    if not present:
        return f"{where}: declares a quote {text!r} of {source} that its text no longer contains"
    if ORDERING.fullmatch(text):  # a word of ordering quoted from another document: its source prints it
        path = ROOT / source
        if not path.is_file():
            raise FileNotFoundError(f"a quote names {source} as its source, and there is no such file")
        evidence = _outputs_text(path) if path.suffix == ".ipynb" else path.read_text(encoding="utf-8")
        word = Claim(where, text, 0.0, 0, ordering_kind(text), prose)
        return (
            None
            if ordering_supported(word, evidence)
            else f"{where}: quotes {text!r} from {source}, which prints no such comparison"
        )
    if ":" in source and not source.endswith(":"):
        path, name = source.rsplit(":", 1)
        return _check_setting_quote(text, path, name, where)
    found, _ = claims_in(text, where)
    if not found:
        return f"{where}: declares a quote {text!r} of {source} with no figure in it"
    numbers = source_numbers(source)
    for claim in found:
        if not supports(claim, numbers):
            return f"{where}: quotes {text!r} from {source}, which no longer prints it (re-executed since?)"
    if source.endswith(".json"):
        problems = stale_settings(ROOT / source)
        if problems:
            return f"{where}: quotes {text!r} from a stale record: " + "; ".join(problems)
    return None


def _parts(m: re.Match) -> list[str]:
    parts = [m.group("num")]
    if m.group("range"):
        parts.append(re.search(r"\d+(?:\.\d+)?", m.group("range")).group(0))
    return parts


def _keep_citations(markdown: str) -> str:
    return CITATION.sub("\x00CITE", markdown).replace("\x00CITE`", "\x00CITE `")


def printed_numbers(text: str) -> list[tuple[float, int]]:
    """(value, decimals) of every number in an output."""
    numbers = []
    for m in PRINTED.finditer(text):
        token = m.group(0).replace(MINUS, "-").replace(",", "")
        mantissa = token.split("e")[0]
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        try:
            value = float(token)
        except ValueError:
            continue
        if "e" in token:  # 1.75e-07: its precision is relative
            exponent = int(token.split("e")[1])
            decimals = max(decimals - exponent, 0)
        numbers.append((value, decimals))
    return numbers


def supports(claim: Claim, printed: list[tuple[float, int]]) -> bool:
    """Is the claim one of the printed numbers, at the precision the prose uses?"""
    scale = {"million": 1e6, "thousand": 1e3}.get(claim.kind, 1.0)
    tolerance = 0.5 * 10 ** (-claim.decimals) * scale + 1e-12
    if claim.kind == "approximate ratio":
        tolerance = max(tolerance, APPROXIMATE * claim.value)
    target = claim.value * scale
    for value, decimals in printed:
        candidates = [(value, decimals)]
        if claim.kind == "percent":
            candidates.append((value * 100, decimals - 2))
        for v, d in candidates:
            precise_enough = d >= claim.decimals or scale > 1 or claim.kind == "approximate ratio"
            if precise_enough and abs(v - target) <= tolerance:
                return True
    return False


def _output_text(cell) -> str:
    texts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            texts.append(output.get("text", ""))
        elif output.get("output_type") in ("execute_result", "display_data"):
            data = output.get("data", {})
            texts.append(data.get("text/plain", "") if "text/plain" in data else data.get("text/markdown", ""))
    return "\n".join(texts)


def _points_below(sentence: str) -> bool:
    return bool(
        re.search(r"\b(below|following|next cell|this cell|the cell that follows)\b", sentence, re.IGNORECASE)
        or re.search(r"下表|下面|下方|下文|如下|于下|下一个单元格|这个单元格|此单元格", sentence)
    )


SUMMARY = re.compile(r"#+\s*Summary\b", re.IGNORECASE)


def _heading(markdown: str) -> bool:
    return markdown.lstrip().startswith("#")


def _own_chapter(path: Path) -> int | None:
    return int(path.name[:2]) if path.name[:2].isdigit() else None


def check_notebook(path: Path, report: Report | None = None) -> Report:
    report = report or Report()
    nb = read_notebook(path)
    printed_above: list[tuple[float, int]] = []
    section: list[str] = []  # what the code cells print since the last heading: the evidence for an ordering word
    everything: list[str] = []  # what every code cell above prints: a summary's evidence
    code_above: list[str] = []
    cells = nb.cells
    own = _own_chapter(path)
    # between solution-start and solution-end: the exercises' own prose, which argues rather than reports
    in_solution = False
    for index, cell in enumerate(cells):
        if cell.cell_type == "markdown" and "{solution-start}" in cell.source:
            in_solution = True
        if cell.cell_type == "code":
            printed_above += printed_numbers(_output_text(cell))
            section.append(_output_text(cell))
            everything.append(_output_text(cell))
            code_above.append(cell.source)
            continue
        if cell.cell_type != "markdown":
            continue
        if SUMMARY.match(cell.source.lstrip()):
            section = list(everything)  # a summary restates the whole chapter: everything printed above is its evidence
        elif _heading(cell.source):
            section = []
        below: list[tuple[float, int]] = []
        below_text: list[str] = []
        for later in cells[index + 1 :]:
            if later.cell_type == "markdown" and below_text:
                break
            if later.cell_type == "code":
                below += printed_numbers(_output_text(later))
                below_text.append(_output_text(later))
        where = f"{path.relative_to(ROOT)}, cell {index}"
        declared = {str(k) for k in cell.metadata.get("claims", {})}
        quotes = _sources(cell.metadata.get("quotes", {}))
        prose = prose_of(cell.source) + "\n" + prose_of(cell.source, math=True)
        for text, sources in quotes.items():
            for source in sources:
                report.quotes.append(f"{text} <- {source}")
                problem = check_quote(text, source, where, prose)
                if problem:
                    report.problems.append(problem)
        _file_settings(report, setting_quotes_in(cell.source, where, own), quotes, declared)
        found, cited = claims_in(cell.source, where)
        report.cited += cited
        for claim in found:
            report.checked.append(claim)
            if claim.text in quotes:
                report.quoted.append(claim)
            elif claim.text in declared or claim.text.rstrip("%×M").strip() in declared:
                report.declared.append(claim)
            elif supports(claim, printed_above) or (_points_below(claim.sentence) and supports(claim, below)):
                continue
            elif any(_verbatim_in_code(claim, source) for source in code_above):
                report.from_code.append(claim)
            else:
                others = chapters_named(claim.sentence) - {own}
                if others:
                    claim.note = f'quoted from chapter {min(others)}? name it in the cell\'s "quotes"'
                report.unsupported.append(claim)
        solution = in_solution or "{solution}" in cell.source
        if "{solution-end}" in cell.source:
            in_solution = False
        words, cited_words = ([], []) if solution else orderings_in(cell.source, where)
        report.cited += cited_words
        above, below = "\n".join(section), "\n".join(below_text)
        _file_orderings(
            report,
            words,
            quotes,
            declared,
            lambda claim, above=above, below=below: (
                ordering_supported(claim, above) or (_points_below(claim.sentence) and ordering_supported(claim, below))
            ),
            "no cell above in this section prints this comparison",
        )
    return report


def _sources(quotes: dict) -> dict[str, list[str]]:
    """A cell's "quotes": each text with its sources, one (``"notebooks/03_attention.ipynb"``) or several
    (``["notebooks/05_multihead_attention.ipynb:lr", "notebooks/06_positional_encoding.ipynb:lr"]``)."""
    return {str(k): [str(s) for s in v] if isinstance(v, list) else [str(v)] for k, v in quotes.items()}


def _file_orderings(report, words, quotes, declared, supported, note: str) -> None:
    """File each word of ordering or growth: quoted, declared, supported by a printed comparison, or unsupported."""
    lowered = {d.lower() for d in declared}
    for claim in words:
        report.orderings.append(claim)
        if claim.text in quotes:
            report.quoted.append(claim)
        elif claim.text.lower() in lowered:
            report.declared.append(claim)
        elif not supported(claim):
            claim.note = note
            report.unsupported.append(claim)


def _verbatim_in_code(claim: Claim, source: str) -> bool:
    written = re.escape(claim.text.rstrip("%×Mk ").replace(MINUS, "-").strip())
    variants = {written, written.replace(",", "_"), written.replace(",", "")}
    return any(re.search(rf"(?<![\w.]){v}(?![\w.]?\d)", source) for v in variants)


#: A page's own lines about its figures, MyST comments that the book does not show:
#:   % claims: results book/results/portability.json    (figures recorded by a script's run, with its machine)
#:   % claims: results notebooks/03_attention.ipynb      (figures a chapter prints)
#:   % claims: "0.98" Adam's beta2 in the paper's recipe   (a constant, or an argument's word, with the reason)
#:   % quotes: "17.9" notebooks/03_attention.ipynb         (one figure quoted from one source, checked there only;
#:                                                          a line more for each further source of the same text)
PAGE_NOTE = re.compile(
    r"^% (?:claims: (?:results (?P<results>\S+)|\"(?P<figure>[^\"]+)\" (?P<reason>.+))"
    r"|quotes: \"(?P<quote>[^\"]+)\" (?P<source>\S+))$",
    re.MULTILINE,
)


def _outputs_of(notebook: Path) -> list[tuple[float, int]]:
    return printed_numbers(_outputs_text(notebook))


def _outputs_text(notebook: Path) -> str:
    return "\n".join(_output_text(cell) for cell in read_notebook(notebook).cells if cell.cell_type == "code")


def check_page(path: Path, report: Report | None = None) -> Report:
    """A book page's figures: printed by a notebook or recorded in a results file that the page names, or declared.

    The sources are named, not searched for: among all the outputs of the book, almost any figure turns up
    somewhere by chance. A figure quoted with ``% quotes:`` is checked against its one source; a recorded run
    that the page names must still describe the settings of the notebook it ran.
    """
    report = report or Report()
    text = path.read_text(encoding="utf-8")
    where = str(path.relative_to(ROOT))
    declared: set[str] = set()
    quotes: dict[str, list[str]] = {}
    recorded: list[tuple[float, int]] = []
    evidence: list[str] = []
    body = PAGE_NOTE.sub(" ", text)
    for note in PAGE_NOTE.finditer(text):
        if note.group("results"):
            results = ROOT / note.group("results")
            if not results.is_file():
                raise FileNotFoundError(
                    f"{path.name} names {note.group('results')} as its results, and there is no such file"
                )
            if results.suffix == ".ipynb":
                recorded += _outputs_of(results)
                evidence.append(_outputs_text(results))
            else:
                recorded += printed_numbers(results.read_text(encoding="utf-8"))
                evidence.append(results.read_text(encoding="utf-8"))
                report.problems += [f"{where}: {p}" for p in stale_settings(results)]
        elif note.group("quote"):
            quotes.setdefault(note.group("quote"), []).append(note.group("source"))
        else:
            declared.add(note.group("figure"))
    prose = prose_of(body) + "\n" + prose_of(body, math=True)
    for quoted, sources in quotes.items():
        for source in sources:
            report.quotes.append(f"{quoted} <- {source}")
            problem = check_quote(quoted, source, where, prose)
            if problem:
                report.problems.append(problem)
    _file_settings(report, setting_quotes_in(body, where, None), quotes, declared)
    found, cited = claims_in(body, where)
    report.cited += cited
    for claim in found:
        report.checked.append(claim)
        if claim.text in quotes:
            report.quoted.append(claim)
        elif claim.text in declared:
            report.declared.append(claim)
        elif not supports(claim, recorded):
            report.unsupported.append(claim)
    words, cited_words = orderings_in(body, where)
    report.cited += cited_words
    text = "\n".join(evidence)
    _file_orderings(
        report,
        words,
        quotes,
        declared,
        lambda claim: ordering_supported(claim, text),
        "no source the page names prints this comparison",
    )
    return report


def main() -> int:
    total = 0
    for path in NOTEBOOKS + PAGES:
        report = check_notebook(path) if path.suffix == ".ipynb" else check_page(path)
        total += len(report.failures)
        print(
            f"{path.relative_to(ROOT)}: {len(report.checked)} figures, {len(report.quotes)} quotes of another "
            f"document, {len(report.orderings)} words of ordering or growth; {len(report.failures)} unsupported "
            f"or stale, {len(report.from_code)} settings written in the code, "
            f"{len(report.declared)} declared, {len(report.cited)} cited"
        )
        for failure in report.failures:
            print(f"    {failure}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
