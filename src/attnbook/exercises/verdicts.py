"""The sentences of a checker's verdict (:mod:`.checking`), each a :class:`~.wording.Template` to translate.

A verdict starts with ✓ (every case passes), ✗ (a mistake, and what to do) or ○ (not attempted yet, or the book's
own solution, which earns no tick). ``{name}`` is the function the exercise asks for; ``{case}`` a case's name.
"""

from __future__ import annotations

from .wording import Template, words

#: The words that start a checker's answer to a stub (``...``, ``return None`` or
#: ``raise NotImplementedError``): an attempt cell stores this message, never a traceback.
NOT_ATTEMPTED = "not attempted yet"

#: The mistakes the checking itself names, beside those each checker plants.
LIBRARY_MISTAKE = words("the packaged answer called", "mistake")
LOOP_MISTAKE = words("a Python loop", "mistake")
THREAD_MISTAKE = words("work in another thread or process", "mistake")
SOLUTION_MISTAKE = words("the checker's own solution called", "mistake")
WATCH_MISTAKE = words("the checker's watch changed", "mistake")

_MISTAKE = "\n  This is the mistake '{mistake}'."
_VERDICT = {"case": "case", "mistake": "mistake"}

PASSED = Template("✓ {name}: all {count} cases pass.", "verdict")
NOT_A_FUNCTION = Template("✗ {name}: expected a function, got {kind}", "verdict")
UNATTEMPTED = Template(
    "○ {name}: " + NOT_ATTEMPTED + " ({why}). Write your code in place of `...`, "
    "then run this cell again; the solution is folded below.",
    "verdict",
    why="unattempted",
)
RAISED_NOT_IMPLEMENTED = Template("it raised NotImplementedError", "unattempted")
RETURNED_NOTHING = Template("it returned None", "unattempted")

RAISED = Template("✗ {name}, case '{case}': it raised {error}: {message}", "verdict", case="case", message="error")
RAISED_IN = Template(
    "✗ {name}, case '{case}': it raised {error}: {message} (raised in {path}, line {line})",
    "verdict",
    case="case",
    message="error",
)
RETURNED_NONE = Template(
    "✗ {name}, case '{case}': it returned None; did a `return` go missing on some path?", "verdict", case="case"
)
WRONG = Template(
    "✗ {name}, case '{case}':\n  {problem}\n  expected: {expected}\n  got:      {got}",
    "verdict",
    case="case",
    problem="problem",
)
WRONG_KNOWN = Template(
    "✗ {name}, case '{case}':\n  {problem}\n  expected: {expected}\n  got:      {got}"
    "\n  This is the mistake '{mistake}': {explanation}",
    "verdict",
    case="case",
    problem="problem",
    mistake="mistake",
    explanation="explanation",
)

BUILT_A_MODULE = Template(
    "✗ {name}, case '{case}': it built a PyTorch module (`{called}`). This exercise asks for a number worked out "
    "on paper: count with arithmetic, build no model; write it yourself." + _MISTAKE,
    "verdict",
    **_VERDICT,
)
CALLED_FROM_PACKAGE = Template(
    "✗ {name}, case '{case}': it called `{called}`, from `{package}`. This exercise asks you to write it: nothing "
    "from `{package}` is a tool here; write it yourself." + _MISTAKE,
    "verdict",
    **_VERDICT,
)
CALLED_AS = Template(
    "✗ {name}, case '{case}': it called `{called}`, which is `{answer}`. This exercise asks you to write it: "
    "`{answer}` is the answer, not a tool; write it yourself." + _MISTAKE,
    "verdict",
    **_VERDICT,
)
CALLED = Template(
    "✗ {name}, case '{case}': it called `{answer}`. This exercise asks you to write it: `{answer}` is the answer, "
    "not a tool; write it yourself." + _MISTAKE,
    "verdict",
    **_VERDICT,
)

LOOP_CASE = Template("{count} {what}", "case", what="loop")
LOOP_RAISED = Template(
    "✗ {name}: on longer {what} it raised {error}: {message}", "verdict", what="loop", message="error"
)
LOOP = Template(
    "✗ {name}: the answers are right, but the work grows with the number of {what}: {few_ops} PyTorch operations "
    "(each number handed to Python, by item() or tolist(), counts as one) and {few_lines} lines of your Python for "
    "{small} {what}, {many_ops} and {many_lines} for {large}. That is a "
    "Python loop over {what}, and the exercise asks for none: let one tensor operation handle them all at once "
    "(broadcasting, a mask, gather, cumsum...)." + _MISTAKE,
    "verdict",
    what="loop",
    mistake="mistake",
)
UNMET = Template("✗ {name}: {message}" + _MISTAKE, "verdict", message="requirement", mistake="mistake")

TAMPERED = Template(
    "✗ {name}: the checker's own watch was changed while it checked ({what}). That is a mistake of the checker's "
    "run, not a verdict on your function: a function that switches the checker off, or a cell that changes it, "
    "certifies nothing. Restart the kernel, run the cells again, and check your function as it is." + _MISTAKE,
    "verdict",
    what="tampers",
    mistake="mistake",
)
#: What was tampered with, one thing or several joined by "; ".
TAMPERS_ONE = Template("{one}", "tampers", one="tamper")
TAMPERS_MORE = Template("{one}; {more}", "tampers", one="tamper", more="tampers")
CHECKER_CHANGED = Template(
    "the checker itself (a method, a setting or its table of refused answers) was changed", "tamper"
)
TABLE_CHANGED = Template("the table of refused answers was changed", "tamper")
DISPATCH_OFF = Template("PyTorch's dispatch mode was switched off", "tamper")
HOOK_CALLED = Template("`{event}` was called", "tamper")
PROFILE_REPLACED = Template("the interpreter's profile hook was replaced", "tamper")
TRACE_REPLACED = Template("the interpreter's trace hook was replaced", "tamper")
FUNCTION_MODE_GONE = Template("PyTorch's function mode was removed or covered", "tamper")
DISPATCH_MODE_GONE = Template("PyTorch's dispatch mode was removed or covered", "tamper")

_ELSEWHERE = (
    " (`{called}`), where the checker cannot see what runs. This exercise asks for the computation itself, in "
    "one thread: write it without threads, executors, pools or processes (PyTorch's own threads inside an "
    "operation are fine)." + _MISTAKE
)
IN_A_THREAD = Template("✗ {name}, case '{case}': it handed work to another thread" + _ELSEWHERE, "verdict", **_VERDICT)
IN_A_PROCESS = Template(
    "✗ {name}, case '{case}': it handed work to another process" + _ELSEWHERE, "verdict", **_VERDICT
)

BOOK_SOLUTION = Template(
    "○ {name}: this is the book's solution (the cell folded under the exercise), or a copy of it: it passes all "
    "{count} cases, and earns no tick, which is kept for code of your own. Write yours in the cell under the "
    "exercise and check it there.",
    "verdict",
)
OWN_SOLUTION = Template(
    "✗ {name}, case '{case}': it ran the checker's own solution (`{called}`), or a copy of it. The solution that "
    "ships with the checker is the answer, not a tool; write it yourself." + _MISTAKE,
    "verdict",
    **_VERDICT,
)
