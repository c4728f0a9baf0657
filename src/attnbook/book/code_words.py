"""The words among the code: a code cell's comments and docstrings, found, translated and set aside.

The Chinese edition translates what a code cell *says* to its reader and nothing of what it *does*. A cell's
words are its comments (a run of whole-line comments at one indentation is one passage, a trailing comment
another, a Colab form line such as ``# @title ...`` one of its own) and its docstrings (of the cell, of a
function, of a class). Each is a passage of the notebook's catalogue, kept as the English source writes it: a
comment from its ``#`` on, line by line; a docstring's text between its quotes, dedented. A translation
replaces exactly those characters: every code line stays as it is, and a trailing comment keeps its column
(Chinese characters are twice as wide, so alignment with a neighbour's comment holds only roughly).

:func:`code_tokens` is the code without its words, token for token (IPython's ``%`` and ``!`` lines whole), by
which ``tests/test_edition.py`` proves the two editions run the same code. :func:`has_words` tells a passage
with English words (to translate) from one of shapes, identifiers and formulas (``# (B, T, d)``), which stays.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass

__all__ = [
    "Words",
    "NAMES",
    "has_words",
    "words_of",
    "translate_code",
    "code_tokens",
    "magic_lines",
    "code_problems",
]

#: An IPython line that is not Python: ``%pip install ...``, ``!ls``.
_MAGIC = re.compile(r"^\s*[%!]")
#: A comment that instructs a tool rather than a reader: kept as it is.
_DIRECTIVE = re.compile(r"^#\s*(noqa\b|type:|fmt:|pragma\b|pylint:|ruff:|NBVAL_|@param\b|@markdown\b)")
#: A Colab form line: its own passage (Colab shows the text after ``@title`` as the cell's title).
_FORM = re.compile(r"^#\s*@\w+")
_STRING = re.compile(r"^([rRuU]?)('''|\"\"\"|'|\")(.*)\2$", re.S)

#: Names a Chinese text keeps in English (``locales/README.md``): models, functions, Python's constants, and
#: the paper's own box name "Add & Norm", which the translated prose also keeps. They are not words to translate.
NAMES = frozenset(
    """Transformer Transformers Fastformer softmax logit logits dropout Dropout einsum argmax argsort Adam Colab
    Python True False None Add Norm""".split()
)

#: An identifier, not a word: a dotted name (``nn.Linear``), a name with a letter and a digit or an underscore
#: (``d_model``, ``W1``), or a name that is called (``argsort(perm)``).
_IDENTIFIER = re.compile(
    r"(?<![A-Za-z0-9_.])(?:"
    r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+"
    r"|(?=[A-Za-z0-9_]*[A-Za-z])[A-Za-z0-9]*[0-9_][A-Za-z0-9_]*"
    r"|[A-Za-z_][A-Za-z0-9_]*(?=\()"
    r")(?![A-Za-z0-9_])",
    re.A,
)
#: A tensor's shape: names or numbers, joined by operators, between commas: ``(B, T, d)``, ``(n,)``, ``(B, S + T)``.
_SHAPE = re.compile(r"\((?:\s*\w+(?:\s*[-+*/]\s*\w+)*\s*,)+(?:\s*\w+(?:\s*[-+*/]\s*\w+)*\s*)?\)")

#: What is not a word even where it has letters: a code span, a shape, a <special token>, a Colab marker, a
#: formula, an identifier, a camel-cased or all-capital name (LayerNorm, BLEU, FULL_RUN).
_NOT_WORDS = (
    re.compile(r"`[^`]*`"),
    re.compile(r"\$[^$]*\$"),
    _IDENTIFIER,
    _SHAPE,
    re.compile(r"<\w+>"),
    re.compile(r"@\w+"),
    re.compile(r"\b[A-Za-z]*[a-z][A-Z]\w*|\b[A-Z]{2,}\w*"),
)


def has_words(text: str) -> bool:
    """Whether ``text`` (a comment, a docstring, a label) says something in English words to translate.

    ``# (B, T, d)``, ``# h_t = f(x_t, h_{t-1})``, ``# noqa: E731`` and ``GRU`` have none; ``# (B, T): True at
    the padding`` has.
    """
    if _DIRECTIVE.match(text.lstrip()):
        return False
    for pattern in _NOT_WORDS:
        text = pattern.sub(" ", text)
    return any(word not in NAMES for word in re.findall(r"[A-Za-z]{2,}", text))


@dataclass(frozen=True)
class Words:
    """One passage of a code cell: a comment (its lines from the ``#``) or a docstring (its text, dedented).

    ``start`` and ``end`` are (line, column) in the cell's source, lines from 1, columns in characters, ``end``
    just after the passage: the characters a translation replaces.
    """

    kind: str  # "comment" or "docstring"
    text: str
    start: tuple[int, int]
    end: tuple[int, int]
    #: A docstring's layout: what stands before and after its text between the quotes, and the indentation
    #: of its lines after the first.
    lead: str = ""
    trail: str = ""
    indent: str = ""


def _masked(source: str) -> str:
    """``source`` with each IPython line replaced by ``pass`` (at its indentation), so that Python reads it."""
    return "\n".join(
        line[: len(line) - len(line.lstrip())] + "pass" if _MAGIC.match(line) else line for line in source.split("\n")
    )


def magic_lines(source: str) -> list[str]:
    """The IPython lines of a cell (``%pip ...``, ``!ls``), as written."""
    return [line for line in source.split("\n") if _MAGIC.match(line)]


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(_masked(source)).readline))


def _docstring_nodes(tree: ast.Module) -> list[ast.Constant]:
    """The string constants that are docstrings: the first statement of the cell, of a function, of a class."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.append(first.value)
    return found


def _column(line: str, byte_offset: int) -> int:
    """The character column of a UTF-8 byte offset in ``line`` (``ast`` counts bytes, ``tokenize`` characters)."""
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8"))


def _docstring(token: tokenize.TokenInfo) -> Words | None:
    found = _STRING.match(token.string)
    if found is None:  # a bytes or f-string literal is not a docstring
        return None
    body = found.group(3)
    lead = re.match(r"\s*", body).group(0)
    trail = re.search(r"\s*\Z", body[len(lead) :]).group(0)
    core = body[len(lead) : len(body) - len(trail)]
    lines = core.split("\n")
    rest = [line for line in lines[1:] if line.strip()]
    indent = min((re.match(r"[ \t]*", line).group(0) for line in rest), key=len) if rest else ""
    text = "\n".join([lines[0], *(line[len(indent) :] if line.strip() else "" for line in lines[1:])])
    if not indent:
        indent = " " * token.start[1]
    return Words("docstring", text, token.start, token.end, lead=lead, trail=trail, indent=indent)


def words_of(source: str) -> list[Words]:
    """The comments and docstrings of a code cell, in the order they stand; [] if it is not Python.

    Consecutive whole-line comments at one column are one passage, except a Colab form line or a tool's
    directive, which stand alone; a trailing comment is a passage of its own.
    """
    try:
        tokens = _tokens(source)
        tree = ast.parse(_masked(source))
    except (SyntaxError, tokenize.TokenError, IndentationError):
        return []
    lines = _masked(source).split("\n")
    starts = {(n.lineno, _column(lines[n.lineno - 1], n.col_offset)) for n in _docstring_nodes(tree)}
    found: list[Words] = []
    for token in tokens:
        if token.type == tokenize.STRING and token.start in starts:
            docstring = _docstring(token)
            if docstring is not None:
                found.append(docstring)
        elif token.type == tokenize.COMMENT:
            row, col = token.start
            whole_line = not token.line[:col].strip()
            previous = found[-1] if found else None
            if (
                whole_line
                and previous is not None
                and previous.kind == "comment"
                and previous.end[0] == row - 1
                and previous.start[1] == col
                and not lines[row - 2][:col].strip()  # the previous comment is a whole-line one too
                and not _FORM.match(token.string)
                and not _FORM.match(previous.text)
                and not _DIRECTIVE.match(token.string)
                and not _DIRECTIVE.match(previous.text.split("\n")[-1])
            ):
                found[-1] = Words("comment", previous.text + "\n" + token.string, previous.start, token.end)
            else:
                found.append(Words("comment", token.string, token.start, token.end))
    return found


def _literal(words: Words, text: str, original: str) -> str:
    """The docstring literal ``original`` with ``text`` in place of its words, laid out as before."""
    found = _STRING.match(original)
    prefix, quote = found.group(1), found.group(2)
    lines = text.split("\n")
    body = lines[0] + "".join("\n" + (words.indent + line if line else "") for line in lines[1:])
    return f"{prefix}{quote}{words.lead}{body}{words.trail}{quote}"


def translate_code(source: str, translate) -> str:
    """``source`` with each of its words replaced by ``translate(words)`` (a string: the same text, or another).

    A translated comment must be comments only (each line from its ``#``), a trailing one a single line; a
    docstring must stay one literal. Anything else is refused with a ValueError rather than written as code.
    """
    lines = source.split("\n")
    for words in reversed(words_of(source)):
        text = translate(words)
        if text == words.text:
            continue
        problems = code_problems(words.text, text, words.kind)
        if problems:
            raise ValueError(f"the translation of {words.text[:60]!r} cannot replace it: {'; '.join(problems)}")
        (row, col), (end_row, end_col) = words.start, words.end
        head, tail = lines[row - 1][:col], lines[end_row - 1][end_col:]
        if words.kind == "docstring":
            original = "\n".join(lines[row - 1 : end_row])[col:]
            original = original[: len(original) - len(tail)] if tail else original
            new = (head + _literal(words, text, original) + tail).split("\n")
        elif head.strip():  # a trailing comment
            new = [head + text + tail]
        else:
            new = [head + line for line in text.split("\n")]
        lines[row - 1 : end_row] = new
    out = "\n".join(lines)
    if code_tokens(out) != code_tokens(source) or magic_lines(out) != magic_lines(source):
        raise ValueError(f"translating the words changed the code of the cell {source[:60]!r}")  # pragma: no cover
    return out


def code_tokens(source: str) -> list[tuple[str, str]]:
    """The code of a cell token for token: (type, text) without comments, docstrings and blank lines; an IPython
    line as one ("MAGIC", line) token."""
    tokens = _tokens(source)
    try:
        tree = ast.parse(_masked(source))
    except SyntaxError:
        return [("SOURCE", source)]
    lines = _masked(source).split("\n")
    docstrings = {(n.lineno, _column(lines[n.lineno - 1], n.col_offset)) for n in _docstring_nodes(tree)}
    magic = {i + 1: line for i, line in enumerate(source.split("\n")) if _MAGIC.match(line)}
    out = []
    for token in tokens:
        if token.type in (tokenize.COMMENT, tokenize.NL) or (
            token.type == tokenize.STRING and token.start in docstrings
        ):
            continue
        if token.type == tokenize.NAME and token.string == "pass" and token.start[0] in magic:
            out.append(("MAGIC", magic[token.start[0]].strip()))
            continue
        out.append((tokenize.tok_name[token.type], token.string))
    return out


#: Pieces of a comment, docstring or label that a translation keeps: a shape, an identifier, an arrow, a Colab
#: form marker.
_KEPT_PIECES = (_SHAPE, _IDENTIFIER, re.compile(r"->"), re.compile(r"@\w+"))


def code_problems(english: str, chinese: str, kind: str) -> list[str]:
    """What a translation of a comment, docstring or label lost that code needs kept, in words.

    Shapes, identifiers, arrows and Colab markers come back as many times; a comment's every line starts with
    ``#`` and a one-line comment stays one line; a docstring holds no closing quotes.
    """
    problems = []
    # A formula is compared as a formula, not as code; a label rewrites one in Unicode (sₜ₋₁, h_S), which may
    # then add pieces, and only a piece lost counts.
    formulas = re.compile(r"\$[^$]*\$")
    rewritten = kind == "label" and formulas.search(english) is not None
    english, chinese = formulas.sub(" ", english), formulas.sub(" ", chinese)
    for pattern in _KEPT_PIECES:
        want, got = sorted(pattern.findall(english)), sorted(pattern.findall(chinese))
        for piece in sorted(set(want) | set(got)):
            if want.count(piece) > got.count(piece) or (want.count(piece) < got.count(piece) and not rewritten):
                problems.append(f"{piece!r}: {want.count(piece)} in the English, {got.count(piece)} in the translation")
    if kind == "comment":
        if any(not line.lstrip().startswith("#") for line in chinese.split("\n")):
            problems.append("every line of a translated comment starts with '#'")
        if "\n" not in english and "\n" in chinese:
            problems.append("a one-line comment stays one line (it may stand after code)")
    if kind == "docstring" and ('"""' in chinese or "'''" in chinese or chinese.endswith(("\\", '"', "'"))):
        problems.append("a docstring's translation cannot hold or end with quotes or a backslash")
    return problems
