"""The grammar of the bundled corpus: a sentence as a tree, and its realization in English and in French.

:mod:`attnbook.data.corpus` grows random trees of these classes; :func:`realize`
turns one into English tokens, French tokens, and for each French token the
English tokens it translates (the alignment chapter 3 compares attention with).
The French rules are applied as the tree is realized: agreement, the place of
adjectives, negation, tenses, elision and contractions (the corpus module's
docstring lists them).
"""

from __future__ import annotations

from . import lexicon as lx
from .lexicon import Adjective, Noun, Preposition, Pronoun, Verb, starts_with_vowel_sound

__all__ = [
    "NP",
    "Coord",
    "Gap",
    "PP",
    "Rel",
    "AdjP",
    "Clause",
    "Sentence",
    "realize",
    "french_spelling",
    "english_spelling",
]


# =====================================================================================
# The tree
# =====================================================================================


class NP:
    """A noun phrase: determiner, adjectives, noun, and optional modifiers."""

    __slots__ = ("noun", "plural", "det", "det_word", "pre", "post", "very", "pp", "rel", "possessor", "depth", "avoid")

    def __init__(self, noun: Noun, plural: bool, det: str, det_word: str | None, depth: int) -> None:
        self.noun = noun
        self.plural = plural
        self.det = det  # def, indef, poss, dem, num
        self.det_word = det_word  # the English possessive or number
        self.pre: Adjective | None = None
        self.post: Adjective | None = None
        self.very = False  # "very" before the first adjective
        self.pp: PP | None = None
        self.rel: Rel | None = None
        self.possessor: NP | None = None
        self.depth = depth
        self.avoid: Adjective | None = None  # the predicate of its copula: not "the big roads are big"

    @property
    def gender(self) -> str:
        return self.noun.gender

    def en_len(self) -> int:
        n = 1 + (self.pre is not None) + (self.post is not None) + self.very
        if self.possessor is not None:
            n += self.possessor.en_len() + 1
        elif not (self.det == "indef" and self.plural):  # English has no plural indefinite article
            n += 1
        if self.pp is not None:
            n += self.pp.en_len()
        if self.rel is not None:
            n += 1 + self.rel.clause.en_len()
        return n


class Coord:
    """Noun phrases joined by "and"."""

    __slots__ = ("items",)

    def __init__(self, items: list[NP]) -> None:
        self.items = items

    @property
    def gender(self) -> str:
        return "f" if all(np.gender == "f" for np in self.items) else "m"

    def en_len(self) -> int:
        return sum(np.en_len() for np in self.items) + len(self.items) - 1


class Gap:
    """The place of the noun a relative clause is about ("the cat that _ sleeps")."""

    __slots__ = ("antecedent",)

    def __init__(self, antecedent: NP) -> None:
        self.antecedent = antecedent


class PP:
    __slots__ = ("prep", "np")

    def __init__(self, prep: Preposition, np: NP) -> None:
        self.prep = prep
        self.np = np

    def en_len(self) -> int:
        return len(self.prep.en) + self.np.en_len()


class Rel:
    __slots__ = ("kind", "clause")

    def __init__(self, kind: str, clause: "Clause") -> None:
        self.kind = kind  # "subj" (qui) or "obj" (que)
        self.clause = clause


class AdjP:
    """A predicate adjective: "is (very) happy"."""

    __slots__ = ("adj", "very")

    def __init__(self, adj: Adjective) -> None:
        self.adj = adj
        self.very = False


_VERB_GROUP_LEN = {  # English tokens of the verb group: (copula, tense, negation)
    (False, "present", None): 1, (False, "present", "pas"): 3, (False, "present", "jamais"): 2,
    (False, "past", None): 1, (False, "past", "pas"): 3, (False, "past", "jamais"): 2,
    (False, "future", None): 4, (False, "future", "pas"): 5, (False, "future", "jamais"): 5,
    (True, "present", None): 1, (True, "present", "pas"): 2, (True, "present", "jamais"): 2,
    (True, "past", None): 1, (True, "past", "pas"): 2, (True, "past", "jamais"): 2,
    (True, "future", None): 4, (True, "future", "pas"): 5, (True, "future", "jamais"): 5,
}  # fmt: skip


class Clause:
    """Subject, verb (``None`` for the copula *be*), complements and adverbs."""

    __slots__ = ("subj", "verb", "tense", "neg", "obj", "recip", "place", "pred", "adjunct", "time", "freq")

    def __init__(self, subj, verb: Verb | None, tense: str, neg: str | None) -> None:
        self.subj = subj  # Pronoun, NP, Coord or Gap
        self.verb = verb
        self.tense = tense  # present, past, future
        self.neg = neg  # None, "pas", "jamais"
        self.obj = None  # NP, Coord or Gap
        self.recip: NP | None = None  # "to the girl"
        self.place: NP | None = None  # the place of a motion verb
        self.pred = None  # AdjP or PP, for the copula
        self.adjunct: PP | None = None
        self.time: lx.Adverb | None = None
        self.freq: lx.Adverb | None = None

    def en_len(self) -> int:
        subj = self.subj
        n = 0 if isinstance(subj, Gap) else 1 if isinstance(subj, Pronoun) else subj.en_len()
        verb = self.verb
        n += _VERB_GROUP_LEN[(verb is None, self.tense, self.neg)] + (self.freq is not None)
        if verb is not None:
            n += _has_particle(verb, self.obj)
            if self.obj is not None and not isinstance(self.obj, Gap):
                n += self.obj.en_len()
            if self.recip is not None:
                n += 1 + self.recip.en_len()
            if self.place is not None:
                n += (verb.place_prep is not None) + self.place.en_len()
        elif isinstance(self.pred, AdjP):
            n += 1 + self.pred.very
        else:
            n += self.pred.en_len()
        if self.adjunct is not None:
            n += self.adjunct.en_len()
        if self.time is not None:
            n += len(self.time.en)
        return n


def _has_particle(verb: Verb, obj) -> bool:
    """ "looks FOR the key", "comes BACK"; but "she listens", not "she listens to"."""
    return verb.particle is not None and (obj is not None or verb.kind == "motion")


class Sentence:
    __slots__ = ("clauses", "conjunctions")

    def __init__(self, clause: Clause) -> None:
        self.clauses = [clause]
        self.conjunctions: list[tuple[str, tuple[str, ...], bool]] = []

    def en_len(self) -> int:
        n = sum(c.en_len() for c in self.clauses) + 1  # the final full stop
        for _, _, comma in self.conjunctions:
            n += 1 + comma
        return n


# =====================================================================================
# Realization: the tree to English and French tokens, with the alignment
# =====================================================================================

FrTokens = list  # of (French word, tuple of English indices)


def _agree_participle(participle: str, gender: str, plural: bool) -> str:
    form = participle + "e" if gender == "f" else participle
    if plural and not form.endswith("s"):
        form += "s"
    return form


def _features(subj) -> tuple[int, bool, str, str]:
    """(French person index, plural, gender, English person: '1sg', '3sg' or 'other')."""
    if isinstance(subj, Gap):
        subj = subj.antecedent
    if isinstance(subj, Pronoun):
        en = "1sg" if subj.en == "i" else "3sg" if subj.person == 2 else "other"
        return subj.person, subj.plural, subj.gender, en
    if isinstance(subj, Coord):
        return 5, True, subj.gender, "other"
    return (5, True, subj.gender, "other") if subj.plural else (2, False, subj.gender, "3sg")


class _Realizer:
    """Appends English tokens in English order and returns French tokens in French order."""

    def __init__(self) -> None:
        self.en: list[str] = []
        self.main_verb = -1  # English index of the last main verb realized

    def add(self, word: str) -> int:
        self.en.append(word)
        return len(self.en) - 1

    # -- noun phrases --
    def np(self, np: NP, neg_object: bool = False) -> FrTokens:
        noun, plural, gender = np.noun, np.plural, np.noun.gender
        if np.possessor is not None:
            possessor_fr = self.np(np.possessor)
            det_fr = [("les" if plural else "la" if gender == "f" else "le", (self.add("'s"),))]
        else:
            possessor_fr = None
            det_fr = self._determiner(np, neg_object)
        first = np.pre or np.post
        very_fr = None
        if np.very and np.pre is not None:
            very_fr = ("très", (self.add("very"),))
        pre_fr = None
        if np.pre is not None:
            i = self.add(np.pre.en)
            form = np.pre.form(gender, plural)
            if np.pre.vowel_form and not plural and gender == "m" and starts_with_vowel_sound(noun.fr):
                form = np.pre.vowel_form
            pre_fr = (form, (i,))
        post_very_fr = None
        if np.very and np.pre is None and first is not None:
            post_very_fr = ("très", (self.add("very"),))
        post_fr = (np.post.form(gender, plural), (self.add(np.post.en),)) if np.post is not None else None
        noun_fr = (noun.fr_pl if plural else noun.fr, (self.add(noun.en_pl if plural else noun.en),))
        fr = det_fr
        if det_fr and det_fr[0][0] == "des" and pre_fr is not None:
            fr = [("de", det_fr[0][1])]  # "de grands arbres": des becomes de before an adjective
        if very_fr:
            fr.append(very_fr)
        if pre_fr:
            fr.append(pre_fr)
        fr.append(noun_fr)
        if post_very_fr:
            fr.append(post_very_fr)
        if post_fr:
            fr.append(post_fr)
        if possessor_fr is not None:
            fr.append(("de", det_fr[0][1]))
            fr.extend(possessor_fr)
        if np.pp is not None:
            fr.extend(self.pp(np.pp))
        if np.rel is not None:
            fr.extend(self.rel(np.rel, np))
        return fr

    def _determiner(self, np: NP, neg_object: bool) -> FrTokens:
        det, plural, gender = np.det, np.plural, np.noun.gender
        if det == "indef":
            if plural:  # no English article: "I see cats" = "je vois des chats"
                return [("de" if neg_object else "des", ())]
            i = self.add("a")
            return [("de" if neg_object else "une" if gender == "f" else "un", (i,))]
        if det == "def":
            return [("les" if plural else "la" if gender == "f" else "le", (self.add("the"),))]
        if det == "poss":
            forms = lx.POSSESSIVES[np.det_word]
            return [(forms[2] if plural else forms[1] if gender == "f" else forms[0], (self.add(np.det_word),))]
        if det == "dem":
            i = self.add("these" if plural else "this")
            return [("ces" if plural else "cette" if gender == "f" else "ce", (i,))]
        return [(lx.NUMBERS[np.det_word], (self.add(np.det_word),))]  # num

    def subject_or_object(self, x, neg_object: bool = False) -> FrTokens:
        if isinstance(x, Pronoun):
            return [(x.fr, (self.add(x.en),))]
        if isinstance(x, Coord):
            fr: FrTokens = []
            for k, np in enumerate(x.items):
                if k:
                    fr.append(("et", (self.add("and"),)))
                fr.extend(self.np(np, neg_object))
            return fr
        return self.np(x, neg_object)

    def pp(self, pp: PP) -> FrTokens:
        links = tuple(self.add(w) for w in pp.prep.en)
        return [(w, links) for w in pp.prep.fr] + self.np(pp.np)

    def rel(self, rel: Rel, antecedent: NP) -> FrTokens:
        if rel.kind == "subj":
            i = self.add("who" if "person" in antecedent.noun.tags else "that")
            return [("qui", (i,))] + self.clause(rel.clause)
        i = self.add("that")
        return [("que", (i,))] + self.clause(rel.clause, object_before=antecedent)

    # -- clauses --
    def clause(self, c: Clause, object_before: NP | None = None) -> FrTokens:
        fr: FrTokens = []
        if not isinstance(c.subj, Gap):
            fr.extend(self.subject_or_object(c.subj))
        person, plural, gender, en_person = _features(c.subj)
        verb = c.verb
        fr.extend(self._verb_group(c, person, plural, gender, en_person, object_before))
        if verb is not None:
            if c.place is not None and verb.fr_place_only:
                fr.append((verb.fr_place_only, (self.main_verb,)))  # "enters the house": entre DANS la maison
            if c.obj is not None and not isinstance(c.obj, Gap):
                fr.extend(self.subject_or_object(c.obj, neg_object=c.neg is not None))
            if c.recip is not None:
                fr.append(("à", (self.add("to"),)))
                fr.extend(self.np(c.recip))
            if c.place is not None:
                if verb.place_prep is not None:
                    fr.append((verb.place_prep[1], (self.add(verb.place_prep[0]),)))
                fr.extend(self.np(c.place))
        elif isinstance(c.pred, AdjP):
            if c.pred.very:
                fr.append(("très", (self.add("very"),)))
            fr.append((c.pred.adj.form(gender, plural), (self.add(c.pred.adj.en),)))
        else:
            fr.extend(self.pp(c.pred))
        if c.adjunct is not None:
            fr.extend(self.pp(c.adjunct))
        if c.time is not None:
            links = tuple(self.add(w) for w in c.time.en)
            fr.extend((w, links) for w in c.time.fr)
        return fr

    def _verb_group(
        self, c: Clause, person: int, plural: bool, gender: str, en_person: str, object_before: NP | None
    ) -> FrTokens:
        add, verb, tense, neg = self.add, c.verb, c.tense, c.neg
        be_present = "am" if en_person == "1sg" else "is" if en_person == "3sg" else "are"
        be_past = "were" if en_person == "other" else "was"
        neg_fr = "pas" if neg == "pas" else "jamais"
        fr: FrTokens = []
        if verb is None:  # the copula
            if tense == "future":
                be = add(be_present)
                not_i = add("not" if neg == "pas" else "never") if neg else None
                going = (be, add("going"), add("to"))
                inf = ("être", (add("be"),))
                finite = (lx.ALLER[person], going)
                tail = [inf]
            else:
                be = add(be_present if tense == "present" else be_past)
                not_i = add("not" if neg == "pas" else "never") if neg else None
                if tense == "present":
                    finite, tail = (lx.ETRE[person], (be,)), []
                else:
                    finite, tail = (lx.AVOIR[person], (be,)), [("été", (be,))]
            freq = ("", (add(c.freq.en[0]),)) if c.freq is not None else None
        else:
            freq = None
            if tense == "future":
                be = add(be_present)
                not_i = add("not" if neg == "pas" else "never") if neg else None
                going = (be, add("going"), add("to"))
                main = add(verb.en)
                finite, tail = (lx.ALLER[person], going), [(verb.fr_inf, (main,))]
            else:
                if neg == "pas":
                    do = add("did" if tense == "past" else "does" if en_person == "3sg" else "do")
                    not_i = add("not")
                    main = add(verb.en)
                    finite_links = (do, main) if tense == "present" else (do,)
                else:
                    not_i = add("never") if neg == "jamais" else None
                    if c.freq is not None:
                        freq = ("", (add(c.freq.en[0]),))
                    main = add(verb.en_past if tense == "past" else verb.en_3sg if en_person == "3sg" else verb.en)
                    finite_links = (main,)
                if tense == "present":
                    finite, tail = (verb.fr_present[person], finite_links), []
                else:
                    if verb.aux == "être":
                        aux, participle = lx.ETRE[person], _agree_participle(verb.fr_participle, gender, plural)
                    else:
                        aux = lx.AVOIR[person]
                        participle = verb.fr_participle
                        if object_before is not None:  # "la pomme que j'ai mangée"
                            participle = _agree_participle(participle, object_before.noun.gender, object_before.plural)
                    finite, tail = (aux, finite_links), [(participle, (main,))]
            self.main_verb = main
            if _has_particle(verb, c.obj):
                particle = add(verb.particle)
                if tail:
                    tail[-1] = (tail[-1][0], tail[-1][1] + (particle,))
                else:
                    finite = (finite[0], finite[1] + (particle,))
        if neg:
            fr.append(("ne", (not_i,)))
            fr.append(finite)
            fr.append((neg_fr, (not_i,)))
        else:
            fr.append(finite)
        if freq is not None:
            fr.append((c.freq.fr[0], freq[1]))
        fr.extend(tail)
        return fr

    def sentence(self, s: Sentence) -> FrTokens:
        fr = self.clause(s.clauses[0])
        for clause, (en_conj, fr_conj, comma) in zip(s.clauses[1:], s.conjunctions):
            if comma:
                fr.append((",", (self.add(","),)))
            i = self.add(en_conj)
            fr.extend((w, (i,)) for w in fr_conj)
            fr.extend(self.clause(clause))
        fr.append((".", (self.add("."),)))
        return fr


_CONTRACTIONS = {("à", "le"): "au", ("à", "les"): "aux", ("de", "le"): "du", ("de", "les"): "des", ("de", "des"): "de"}
_ELIDES = {"le": "l'", "la": "l'", "je": "j'", "ne": "n'", "de": "d'", "que": "qu'"}
_BEFORE_VOWEL = {"ma": "mon", "ta": "ton", "sa": "son", "ce": "cet"}


def french_spelling(tokens: FrTokens) -> FrTokens:
    """Apply elision (l', j', n', qu', d'), mon/ton/son and cet before a vowel, and au/aux/du/des."""
    out: FrTokens = []
    n = len(tokens)
    for k, (word, links) in enumerate(tokens):
        nxt = tokens[k + 1][0] if k + 1 < n else ""
        if (word in _ELIDES or word in _BEFORE_VOWEL) and starts_with_vowel_sound(nxt):
            word = _ELIDES.get(word) or _BEFORE_VOWEL[word]
        if out:
            merged = _CONTRACTIONS.get((out[-1][0], word))
            if merged is not None:
                prev_links = out[-1][1]
                if merged == "de" and starts_with_vowel_sound(nxt):
                    merged = "d'"
                out[-1] = (merged, prev_links + tuple(i for i in links if i not in prev_links))
                continue
        out.append((word, links))
    return out


def english_spelling(tokens: list[str]) -> list[str]:
    """ "a" becomes "an" before a vowel."""
    return [
        "an" if w == "a" and k + 1 < len(tokens) and tokens[k + 1][0] in "aeiou" else w for k, w in enumerate(tokens)
    ]


def realize(sentence: Sentence) -> tuple[list[str], list[str], list[tuple[int, ...]]]:
    """English tokens, French tokens, and for each French token the English tokens it translates."""
    r = _Realizer()
    fr = french_spelling(r.sentence(sentence))
    return english_spelling(r.en), [w for w, _ in fr], [tuple(sorted(links)) for _, links in fr]
