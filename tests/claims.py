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

``python tests/claims.py`` lists every claim that no output supports, notebook
by notebook; ``tests/test_claims.py`` fails on any.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))

from notebook_index import NOTEBOOKS, read_notebook  # noqa: E402 (tests/ is on the path only from here when run as a script)

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

    def __str__(self) -> str:
        return f"{self.where}: {self.text!r} in “{_shorten(self.sentence)}”"


@dataclass
class Report:
    checked: list[Claim] = field(default_factory=list)
    unsupported: list[Claim] = field(default_factory=list)
    from_code: list[Claim] = field(default_factory=list)
    declared: list[Claim] = field(default_factory=list)
    cited: list[Claim] = field(default_factory=list)


def _shorten(text: str, limit: int = 140) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def prose_of(markdown: str) -> str:
    """The running text of a markdown cell: no code, math, links, tags, roles or exercise statements."""
    text = _EXERCISE.sub(" ", markdown)
    text = _CODE_BLOCK.sub(" ", text)  # code shown in the text (not a directive: those fences hold prose)
    text = re.sub(
        r"^(`{3,4})\{[a-z-]+\}[^\n]*\n(?::[a-z-]+:[^\n]*\n)*", " ", text, flags=re.MULTILINE
    )  # directive heads
    text = re.sub(r"^(`{3,4}|~{3,4})\s*(text|console)?\s*$", " ", text, flags=re.MULTILINE)
    for pattern in _STRIP:
        text = pattern.sub(" ", text)
    return text


def sentences(text: str) -> list[str]:
    """Sentences, list items and table rows: a citation exempts only the figures of its own sentence."""
    ends = r"(?<=[.!?:;])\)?\s+(?=[A-Z(*\"“\x00])|(?<=\.\))\s+"
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
    return bool(re.search(r"\b(below|following|next cell|this cell|the cell that follows)\b", sentence, re.IGNORECASE))


def check_notebook(path: Path, report: Report | None = None) -> Report:
    report = report or Report()
    nb = read_notebook(path)
    printed_above: list[tuple[float, int]] = []
    code_above: list[str] = []
    cells = nb.cells
    for index, cell in enumerate(cells):
        if cell.cell_type == "code":
            printed_above += printed_numbers(_output_text(cell))
            code_above.append(cell.source)
            continue
        if cell.cell_type != "markdown":
            continue
        below: list[tuple[float, int]] = []
        for later in cells[index + 1 :]:
            if later.cell_type == "markdown" and below:
                break
            if later.cell_type == "code":
                below += printed_numbers(_output_text(later))
        declared = {str(k) for k in cell.metadata.get("claims", {})}
        found, cited = claims_in(cell.source, f"{path.relative_to(ROOT)}, cell {index}")
        report.cited += cited
        for claim in found:
            report.checked.append(claim)
            if claim.text in declared or claim.text.rstrip("%×M").strip() in declared:
                report.declared.append(claim)
            elif supports(claim, printed_above) or (_points_below(claim.sentence) and supports(claim, below)):
                continue
            elif any(_verbatim_in_code(claim, source) for source in code_above):
                report.from_code.append(claim)
            else:
                report.unsupported.append(claim)
    return report


def _verbatim_in_code(claim: Claim, source: str) -> bool:
    written = re.escape(claim.text.rstrip("%×Mk ").replace(MINUS, "-").strip())
    variants = {written, written.replace(",", "_"), written.replace(",", "")}
    return any(re.search(rf"(?<![\w.]){v}(?![\w.]?\d)", source) for v in variants)


#: A page's own lines about its figures, MyST comments that the book does not show:
#:   % claims: results book/results/portability.json    (figures recorded by a script's run, with its machine)
#:   % claims: results notebooks/03_attention.ipynb      (figures a chapter prints)
#:   % claims: "0.98" Adam's beta2 in the paper's recipe   (a constant, with the reason)
PAGE_NOTE = re.compile(r"^% claims: (?:results (?P<results>\S+)|\"(?P<figure>[^\"]+)\" (?P<reason>.+))$", re.MULTILINE)


def _outputs_of(notebook: Path) -> list[tuple[float, int]]:
    numbers = []
    for cell in read_notebook(notebook).cells:
        if cell.cell_type == "code":
            numbers += printed_numbers(_output_text(cell))
    return numbers


def check_page(path: Path, report: Report | None = None) -> Report:
    """A book page's figures: printed by a notebook or recorded in a results file that the page names, or declared.

    The sources are named, not searched for: among all the outputs of the book, almost any figure turns up
    somewhere by chance.
    """
    report = report or Report()
    text = path.read_text(encoding="utf-8")
    declared: set[str] = set()
    recorded: list[tuple[float, int]] = []
    for note in PAGE_NOTE.finditer(text):
        if note.group("results"):
            results = ROOT / note.group("results")
            if not results.is_file():
                raise FileNotFoundError(
                    f"{path.name} names {note.group('results')} as its results, and there is no such file"
                )
            if results.suffix == ".ipynb":
                recorded += _outputs_of(results)
            else:
                recorded += printed_numbers(results.read_text(encoding="utf-8"))
        else:
            declared.add(note.group("figure"))
    found, cited = claims_in(PAGE_NOTE.sub(" ", text), str(path.relative_to(ROOT)))
    report.cited += cited
    for claim in found:
        report.checked.append(claim)
        if claim.text in declared:
            report.declared.append(claim)
        elif not supports(claim, recorded):
            report.unsupported.append(claim)
    return report


def main() -> int:
    total = 0
    for path in NOTEBOOKS + PAGES:
        report = check_notebook(path) if path.suffix == ".ipynb" else check_page(path)
        total += len(report.unsupported)
        print(
            f"{path.relative_to(ROOT)}: {len(report.checked)} claims, {len(report.unsupported)} unsupported, "
            f"{len(report.from_code)} settings written in the code, "
            f"{len(report.declared)} declared, {len(report.cited)} cited"
        )
        for claim in report.unsupported:
            print(f"    {claim}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
