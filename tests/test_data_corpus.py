"""The generated English→French corpus: golden translations, French checks on samples, determinism, splits."""

from __future__ import annotations

import collections
import hashlib
import os
import subprocess
import sys

import pytest

from attnbook.data import (
    Corpus,
    Pair,
    alignment_matrix,
    detokenize,
    generate_pairs,
    load_corpus,
    split_by_index,
    tokenize,
)
from attnbook.data import corpus as C
from attnbook.data import grammar as G
from attnbook.data import lexicon as lx
from attnbook.data.lexicon import starts_with_vowel_sound

# --- Building sentences by hand ------------------------------------------------------


def np_(en, plural=False, det="def", word=None, pre=None, post=None, very=False, pp=None, rel=None, possessor=None):
    np = G.NP(lx.noun(en), plural, det, word, 0)
    np.pre = lx.adjective(pre) if pre else None
    np.post = lx.adjective(post) if post else None
    np.very = very
    np.pp, np.possessor = pp, possessor
    if rel is not None:
        kind, clause = rel
        clause.subj = G.Gap(np) if kind == "subj" else clause.subj
        if kind == "obj":
            clause.obj = G.Gap(np)
        np.rel = G.Rel(kind, clause)
    return np


def pron(en):
    return lx.pronoun(en)


def clause(
    subj,
    verb=None,
    tense="present",
    neg=None,
    obj=None,
    recip=None,
    place=None,
    pred=None,
    adjunct=None,
    time=None,
    freq=None,
    very=False,
):
    c = G.Clause(subj, lx.verb(verb) if verb else None, tense, neg)
    c.obj, c.recip, c.place, c.adjunct = obj, recip, place, adjunct
    if pred is not None:
        c.pred = pred if isinstance(pred, G.PP) else G.AdjP(lx.adjective(pred))
        if very:
            c.pred.very = True
    c.time = next(a for a in lx.TIME_ADVERBS if " ".join(a.en) == time) if time else None
    c.freq = next(a for a in lx.FREQUENCY_ADVERBS if a.en[0] == freq) if freq else None
    return c


def prep(en, np):
    return G.PP(
        next(p for p in [*lx.PREPOSITIONS, *lx.COMPANION_PREPOSITIONS, lx.BENEFICIARY] if " ".join(p.en) == en), np
    )


def say(*parts):
    """Realize clauses joined by conjunctions: say(c1, "but", c2)."""
    s = G.Sentence(parts[0])
    for conj, c in zip(parts[1::2], parts[2::2]):
        s.clauses.append(c)
        s.conjunctions.append(next(x for x in lx.CONJUNCTIONS if x[0] == conj))
    en, fr, links = G.realize(s)
    assert len(en) == s.en_len(), "the length the generator tracks must be the realized length"
    assert len(links) == len(fr)
    return detokenize(en, "en"), detokenize(fr, "fr")


# fmt: off
GOLDEN = [
    # agreement of article, adjective and predicate with a feminine plural subject; ne ... pas around the verb
    (lambda: clause(np_("girl", True, pre="small"), None, neg="pas", pred="happy"), "The small girls are not happy.", "Les petites filles ne sont pas heureuses."),
    # possessive before a feminine noun starting with a vowel: mon école
    (lambda: clause(np_("school", det="poss", word="my"), None, pred="big"), "My school is big.", "Mon école est grande."),
    (lambda: clause(np_("school", det="poss", word="my", pre="beautiful"), None, pred="big"), "My beautiful school is big.", "Ma belle école est grande."),
    # vieil before a vowel; passé composé with avoir; English "an"
    (lambda: clause(np_("man", pre="old"), "manger", "past", obj=np_("apple", det="indef")), "The old man ate an apple.", "Le vieil homme a mangé une pomme."),
    (lambda: clause(np_("man", det="indef", pre="old"), "dormir"), "An old man sleeps.", "Un vieil homme dort."),
    (lambda: clause(np_("man", pre="beautiful"), "visiter", obj=np_("hotel", pre="new")), "The beautiful man visits the new hotel.", "Le bel homme visite le nouvel hôtel."),
    (lambda: clause(np_("tree", True, pre="old"), None, pred="green"), "The old trees are green.", "Les vieux arbres sont verts."),
    # negation turns un/une/des into de (d' before a vowel); definite articles stay
    (lambda: clause(pron("i"), "avoir", neg="pas", obj=np_("car", det="indef")), "I do not have a car.", "Je n'ai pas de voiture."),
    (lambda: clause(pron("she"), "avoir", neg="pas", obj=np_("orange", det="indef")), "She does not have an orange.", "Elle n'a pas d'orange."),
    (lambda: clause(pron("i"), "voir", neg="pas", obj=np_("cat", True, det="indef", pre="old")), "I do not see old cats.", "Je ne vois pas de vieux chats."),
    (lambda: clause(pron("he"), "boire", neg="pas", obj=np_("water")), "He does not drink the water.", "Il ne boit pas l'eau."),
    # des becomes de before a plural adjective
    (lambda: clause(pron("we"), "manger", "future", obj=np_("apple", True, det="indef", pre="big")), "We are going to eat big apples.", "Nous allons manger de grandes pommes."),
    # être verbs: the participle agrees with the subject; au, aux, du contractions
    (lambda: clause(pron("she"), "aller", "past", place=np_("park")), "She went to the park.", "Elle est allée au parc."),
    (lambda: clause(pron("he"), "donner", obj=np_("book"), recip=np_("child", True)), "He gives the book to the children.", "Il donne le livre aux enfants."),
    (lambda: clause(np_("friend", det="poss", word="my"), "revenir", "future", neg="pas", place=np_("school")), "My friend is not going to come back from the school.", "Mon ami ne va pas revenir de l'école."),
    (lambda: clause(pron("she"), "sortir", "past", neg="jamais", place=np_("house")), "She never went out of the house.", "Elle n'est jamais sortie de la maison."),
    (lambda: clause(pron("she"), "entrer", place=np_("house")), "She enters the house.", "Elle entre dans la maison."),
    # relative clauses: qui never elides; que does; the participle agrees with a preceding direct object
    (lambda: clause(np_("girl", True, rel=("obj", clause(pron("i"), "voir", "past"))), "partir", "past"), "The girls that I saw left.", "Les filles que j'ai vues sont parties."),
    (lambda: clause(np_("letter", True, rel=("obj", clause(pron("he"), "écrire", "past"))), None, pred="long"), "The letters that he wrote are long.", "Les lettres qu'il a écrites sont longues."),
    (lambda: clause(np_("apple", rel=("obj", clause(np_("child", True), "manger", "past", neg="pas"))), None, pred="red"), "The apple that the children did not eat is red.", "La pomme que les enfants n'ont pas mangée est rouge."),
    (lambda: clause(np_("cat", rel=("subj", clause(None, "dormir"))), None, pred="black"), "The cat that sleeps is black.", "Le chat qui dort est noir."),
    (lambda: clause(np_("girl", rel=("subj", clause(None, None, pred="happy"))), "chanter"), "The girl who is happy sings.", "La fille qui est heureuse chante."),
    # possessor: reordered, with du
    (lambda: clause(np_("dog", possessor=np_("boy")), "dormir"), "The boy's dog sleeps.", "Le chien du garçon dort."),
    (lambda: clause(np_("hat", possessor=np_("woman", pre="old")), None, pred="red"), "The old woman's hat is red.", "Le chapeau de la vieille femme est rouge."),
    # cet, h aspiré
    (lambda: clause(np_("tree", det="dem"), None, pred="beautiful"), "This tree is beautiful.", "Cet arbre est beau."),
    (lambda: clause(np_("owl"), "dormir"), "The owl sleeps.", "Le hibou dort."),
    # coordinated subjects: plural, masculine unless all feminine; his/her agree with the thing possessed
    (lambda: clause(G.Coord([np_("cat"), np_("dog")]), None, pred="happy"), "The cat and the dog are happy.", "Le chat et le chien sont heureux."),
    (lambda: clause(G.Coord([np_("mother"), np_("girl")]), None, pred="happy"), "The mother and the girl are happy.", "La mère et la fille sont heureuses."),
    (lambda: clause(G.Coord([np_("father", det="poss", word="her"), np_("mother", det="poss", word="his")]), None, pred="tired"), "Her father and his mother are tired.", "Son père et sa mère sont fatigués."),
    # adverbs: often after the conjugated verb in French; time adverbs; copula tenses
    (lambda: clause(pron("he"), "manger", freq="often", obj=np_("apple", True, det="indef")), "He often eats apples.", "Il mange souvent des pommes."),
    (lambda: clause(pron("we"), "boire", "past", obj=np_("water"), time="yesterday"), "We drank the water yesterday.", "Nous avons bu l'eau hier."),
    (lambda: clause(pron("they"), None, "future", pred="tired", time="tomorrow"), "They are going to be tired tomorrow.", "Ils vont être fatigués demain."),
    (lambda: clause(pron("you"), None, "past", pred="happy"), "You were happy.", "Tu as été heureux."),
    (lambda: clause(pron("she"), None, "past", neg="pas", pred="tired", very=True), "She was not very tired.", "Elle n'a pas été très fatiguée."),
    # particles, prepositions, numbers, "very"
    (lambda: clause(np_("woman"), "chercher", obj=np_("key")), "The woman looks for the key.", "La femme cherche la clé."),
    (lambda: clause(np_("child", True), "écouter", "past", neg="pas", obj=np_("teacher")), "The children did not listen to the teacher.", "Les enfants n'ont pas écouté le professeur."),
    (lambda: clause(np_("cat"), None, pred=prep("under", np_("table"))), "The cat is under the table.", "Le chat est sous la table."),
    (lambda: clause(np_("book", pp=prep("on", np_("table"))), None, pred="new"), "The book on the table is new.", "Le livre sur la table est nouveau."),
    (lambda: clause(np_("cat", True, det="num", word="two"), "dormir", adjunct=prep("near", np_("park"))), "Two cats sleep near the park.", "Deux chats dorment près du parc."),
    (lambda: clause(np_("dog", pre="big", very=True), "aboyer"), "The very big dog barks.", "Le très grand chien aboie."),
    (lambda: clause(np_("ball", post="red", very=True), None, pred="small"), "The very red ball is small.", "Le ballon très rouge est petit."),
    (lambda: clause(pron("i"), "aimer", obj=np_("egg", True)), "I like the eggs.", "J'aime les œufs."),
    # coordination of clauses, with the comma of "but" and the elision of "parce que"
    (lambda: (clause(pron("i"), "dormir"), "but", clause(pron("you"), "chanter")), "I sleep, but you sing.", "Je dors, mais tu chantes."),
    (lambda: (clause(pron("he"), None, pred="sad"), "because", clause(pron("she"), "partir", "past")), "He is sad because she left.", "Il est triste parce qu'elle est partie."),
]
# fmt: on


@pytest.mark.parametrize("build, english, french", GOLDEN, ids=[g[1] for g in GOLDEN])
def test_golden_translations(build, english, french):
    parts = build()
    parts = parts if isinstance(parts, tuple) else (parts,)
    assert say(*parts) == (english, french)


def test_alignment_of_a_reordered_sentence():
    s = G.Sentence(
        clause(np_("dog", possessor=np_("boy")), "manger", neg="pas", obj=np_("apple", pre="big", det="indef"))
    )
    en, fr, links = G.realize(s)
    assert en == ["the", "boy", "'s", "dog", "does", "not", "eat", "a", "big", "apple", "."]
    assert fr == ["le", "chien", "du", "garçon", "ne", "mange", "pas", "de", "grande", "pomme", "."]
    by_word = {f: [en[j] for j in js] for f, js in zip(fr, links)}
    assert by_word["chien"] == ["dog"] and by_word["garçon"] == ["boy"] and by_word["du"] == ["the", "'s"]
    assert by_word["ne"] == ["not"] == by_word["pas"] and by_word["mange"] == ["does", "eat"]
    assert by_word["de"] == ["a"] and by_word["grande"] == ["big"] and by_word["."] == ["."]


# --- An independent French checker for generated samples -------------------------------

NOUN_FORMS = {}
for _n in lx.NOUNS:
    if _n.countable:
        NOUN_FORMS[(_n.fr_pl, _n.en_pl)] = (_n, True)
    NOUN_FORMS[(_n.fr, _n.en)] = (_n, False)
ADJ_FORMS = collections.defaultdict(set)  # (French form, English) -> {(gender, plural, before_vowel_only)}
for _a in lx.ADJECTIVES:
    for (g, pl), form in zip([("m", False), ("f", False), ("m", True), ("f", True)], _a.forms):
        ADJ_FORMS[(form, _a.en)].add((g, pl, False))
    if _a.vowel_form:
        ADJ_FORMS[(_a.vowel_form, _a.en)].add(("m", False, True))
DETERMINERS = {
    ("m", False): {"le", "l'", "un", "mon", "ton", "son", "notre", "leur", "ce", "cet", "du", "au", "de", "d'"},
    ("f", False): {"la", "l'", "une", "ma", "ta", "sa", "mon", "ton", "son", "notre", "leur", "cette", "de", "d'"},
    ("m", True): {
        "les",
        "des",
        "de",
        "d'",
        "mes",
        "tes",
        "ses",
        "nos",
        "leurs",
        "ces",
        "aux",
        "deux",
        "trois",
        "quatre",
    },
}
DETERMINERS[("f", True)] = DETERMINERS[("m", True)]
FINITE = set(lx.ETRE) | set(lx.AVOIR) | set(lx.ALLER) | {f for v in lx.VERBS for f in v.fr_present}
ETRE_PARTICIPLES = {v.fr_participle for v in lx.VERBS if v.aux == "être"}


def french_problems(pair: Pair) -> list[str]:
    """Everything wrong with the French of a generated pair, checked from the text, the alignment and the lexicon."""
    en, fr, links = pair.src_tokens, pair.tgt_tokens, pair.alignment
    problems = []
    for k, word in enumerate(fr):
        nxt = fr[k + 1] if k + 1 < len(fr) else ""
        vowel = starts_with_vowel_sound(nxt)
        if word in ("le", "la", "je", "ne", "de", "que", "ma", "ta", "sa", "ce") and vowel:
            problems.append(f"no elision: {word} {nxt}")
        if word in ("l'", "j'", "n'", "qu'", "d'", "cet") and not vowel:
            problems.append(f"elision before a consonant: {word}{nxt}")
        if (word, nxt) in {("à", "le"), ("à", "les"), ("de", "le"), ("de", "les")}:
            problems.append(f"missing contraction: {word} {nxt}")
        # ne ... pas around the conjugated verb
        if word in ("ne", "n'"):
            if nxt not in FINITE or k + 2 >= len(fr) or fr[k + 2] not in ("pas", "jamais"):
                problems.append(f"ne ... pas misplaced: {' '.join(fr[k : k + 3])}")
        # nouns: the determiner and the adjectives agree
        sources = [en[j] for j in links[k]]
        found = [NOUN_FORMS[(word, e)] for e in sources if (word, e) in NOUN_FORMS]
        if found:
            noun, plural = found[0]
            g = noun.gender
            i = k - 1
            while i >= 0 and (fr[i] == "très" or any((fr[i], en[j]) in ADJ_FORMS for j in links[i])):
                for j in links[i]:
                    for gg, pl, vowel_only in ADJ_FORMS.get((fr[i], en[j]), ()):
                        if (gg, pl) == (g, plural) and (not vowel_only or starts_with_vowel_sound(fr[k])):
                            break
                    else:
                        if (fr[i], en[j]) in ADJ_FORMS:
                            problems.append(f"adjective {fr[i]} does not agree with {word}")
                i -= 1
            if i < 0 or fr[i] not in DETERMINERS[(g, plural)]:
                problems.append(
                    f"determiner {fr[i] if i >= 0 else None!r} does not agree "
                    f"with {word} ({g}, {'pl' if plural else 'sg'})"
                )
            i = k + 1
            if i < len(fr) and fr[i] == "très":
                i += 1
            if i < len(fr):
                for j in links[i]:
                    forms = ADJ_FORMS.get((fr[i], en[j]))
                    if forms and not any((gg, pl) == (g, plural) for gg, pl, _ in forms):
                        problems.append(f"adjective {fr[i]} does not agree with {word}")
        # être: the participle or predicate adjective has the number of the verb, and the gender of
        # the subject when the subject is a pronoun or a noun right before the verb
        if word in lx.ETRE or (word in lx.AVOIR and nxt == "été"):
            plural_verb = word in ("sommes", "êtes", "sont", "avons", "avez", "ont")
            before = k - 2 if k >= 2 and fr[k - 1] in ("ne", "n'") else k - 1
            gender = None
            if before >= 0 and fr[before] in ("il", "ils", "je", "j'", "tu", "nous", "elle", "elles"):
                gender = "f" if fr[before].startswith("elle") else "m"
            elif before >= 0:
                # a noun right before the verb is its subject when nothing but its determiner and
                # adjectives separates it from the start of a clause (not "... devant les ingénieurs est")
                for j in links[before]:
                    if (fr[before], en[j]) in NOUN_FORMS:
                        start = before - 1
                        while start >= 0 and (
                            fr[start] == "très" or any((fr[start], en[jj]) in ADJ_FORMS for jj in links[start])
                        ):
                            start -= 1
                        if start >= 0 and fr[start] in {d for ds in DETERMINERS.values() for d in ds}:
                            if start == 0 or fr[start - 1] in (",", "mais", "que", "qu'"):
                                gender = NOUN_FORMS[(fr[before], en[j])][0].gender
            i = k + 1
            while i < len(fr) and fr[i] in (
                "pas",
                "jamais",
                "souvent",
                "toujours",
                "parfois",
                "rarement",
                "très",
                "été",
            ):
                i += 1
            if i < len(fr):
                stem = fr[i].removesuffix("s").removesuffix("e")
                if stem in ETRE_PARTICIPLES and word in lx.ETRE:
                    if fr[i].endswith("s") != plural_verb or (
                        gender is not None and fr[i].removesuffix("s").endswith("e") != (gender == "f")
                    ):
                        problems.append(f"participle {fr[i]} does not agree with {fr[before]} {word}")
                for j in links[i]:
                    forms = ADJ_FORMS.get((fr[i], en[j]))
                    if forms and not any(pl == plural_verb and gender in (None, g) for g, pl, _ in forms):
                        problems.append(f"predicate {fr[i]} does not agree with {fr[before]} {word}")
    negations_en = sum(w in ("not", "never") for w in en)
    negations_fr = sum(w in ("ne", "n'") for w in fr)
    if negations_en != negations_fr or negations_fr != sum(w in ("pas", "jamais") for w in fr):
        problems.append("negations do not match")
    for k, word in enumerate(en[:-1]):
        if (word == "a" and en[k + 1][0] in "aeiou") or (word == "an" and en[k + 1][0] not in "aeiou"):
            problems.append(f"English article: {word} {en[k + 1]}")
    return problems


@pytest.fixture(scope="module")
def sample() -> list[Pair]:
    return generate_pairs(4000, seed=11)


def test_the_french_checker_catches_planted_errors():
    good = Pair(
        "The small girls are not happy.",
        "Les petites filles ne sont pas heureuses.",
        ((0,), (1,), (2,), (4,), (3,), (4,), (5,), (6,)),
    )
    assert french_problems(good) == []
    for wrong in [
        "Le petites filles ne sont pas heureuses.",
        "Les petits filles ne sont pas heureuses.",
        "Les petites filles ne sont pas heureux.",
        "Les petites filles sont ne pas heureuses.",
        "Les petites filles ne sont heureuses pas.",
    ]:
        assert french_problems(Pair(good.src, wrong, good.alignment)), wrong
    elided = Pair("I like the eggs.", "Je aime le œufs.", ((0,), (1,), (2,), (3,), (4,)))
    assert any("elision" in p for p in french_problems(elided))
    left = Pair("She left.", "Elle est parti.", ((0,), (1,), (1,), (2,)))
    assert any("participle" in p for p in french_problems(left))
    assert not french_problems(Pair("She left.", "Elle est partie.", ((0,), (1,), (1,), (2,))))


def test_french_checks_pass_on_a_sample(sample):
    bad = [(p.src, p.tgt, problems) for p in sample if (problems := french_problems(p))]
    assert not bad, "\n".join(f"{s}\n{t}\n{pr}" for s, t, pr in bad[:5])


def test_the_sample_uses_every_construction(sample):
    fr = collections.Counter(w for p in sample for w in p.tgt_tokens)
    for word in ["l'", "j'", "n'", "qu'", "d'", "au", "aux", "du", "des", "qui", "que", "ne", "pas", "jamais", "et",
                 "mais", "parce", "cet", "bel", "vieil", "nouvel", "va", "vont", "été", "souvent", "très"]:  # fmt: skip
        assert fr[word] > 0, word
    en = collections.Counter(w for p in sample for w in p.src_tokens)
    for word in ["'s", "an", "who", "that", "does", "did", "going", "never", "very"]:
        assert en[word] > 0, word
    participles = {w for p in sample for w in p.tgt_tokens if w.removesuffix("s").removesuffix("e") in ETRE_PARTICIPLES}
    assert {"allée", "allés", "allées", "partie"} <= participles, participles
    agreed = sum(
        ("que" in p.tgt_tokens or "qu'" in p.tgt_tokens) and any(w.endswith(("ée", "ées", "és")) for w in p.tgt_tokens)
        for p in sample
    )
    assert agreed > 20


def test_tokens_and_alignment_are_consistent(sample):
    for p in sample:
        assert tokenize(p.src, "en") == p.src_tokens and tokenize(p.tgt, "fr") == p.tgt_tokens, p
        assert detokenize(p.src_tokens, "en") == p.src and detokenize(p.tgt_tokens, "fr") == p.tgt
        assert len(p.alignment) == len(p.tgt_tokens)
        assert all(0 <= j < len(p.src_tokens) for links in p.alignment for j in links)
        assert p.alignment[-1] == (len(p.src_tokens) - 1,)  # the full stops
        # every English word but the auxiliaries of do-support and "going to" is translated by some French token
        covered = {j for links in p.alignment for j in links}
        untranslated = {p.src_tokens[j] for j in range(len(p.src_tokens)) if j not in covered}
        assert untranslated <= {"do", "does", "did", "going", "to", "be", "is", "are", "am"}, (p, untranslated)
    m = alignment_matrix(sample[0])
    assert m.shape == (len(sample[0].tgt_tokens), len(sample[0].src_tokens)) and (m.sum(1) >= 0).all()
    with pytest.raises(ValueError, match="no alignment"):
        alignment_matrix(Pair("Hi.", "Salut."))


# French words that are a noun and also a verb or adjective form (marché, porte, lit, rose, ...)
AMBIGUOUS = {
    f for v in lx.VERBS for p in (v.fr_participle,) for f in (*v.fr_present, v.fr_inf, p, p + "e", p + "s", p + "es")
}
AMBIGUOUS |= {f for a in lx.ADJECTIVES for f in a.forms} | set(lx.ETRE) | set(lx.AVOIR) | set(lx.ALLER)


def test_nouns_translate_to_their_lexicon_entry(sample):
    noun_en = {(n.en, n.fr) for n in lx.NOUNS} | {(n.en_pl, n.fr_pl) for n in lx.NOUNS}
    french_nouns = {n.fr for n in lx.NOUNS} | {n.fr_pl for n in lx.NOUNS}
    checked = 0
    for p in sample[:500]:
        for f, links in zip(p.tgt_tokens, p.alignment):
            pairs = {(p.src_tokens[j], f) for j in links}
            if pairs & noun_en:
                checked += 1
            elif f in french_nouns and f not in AMBIGUOUS:
                pytest.fail(
                    f"{f} in {p.tgt!r} is not aligned with its English noun: {[p.src_tokens[j] for j in links]}"
                )
    assert checked > 1000


# --- Lengths, determinism, splits ---------------------------------------------------------


def test_lengths_follow_the_distribution_asked_for():
    pairs = generate_pairs(3000, seed=3, min_len=6, max_len=30)
    lengths = collections.Counter(len(p.src_tokens) for p in pairs)
    assert set(lengths) == set(range(6, 31))
    expected = len(pairs) / 25
    assert all(0.6 * expected < lengths[L] < 1.4 * expected for L in range(6, 31)), lengths
    assert all(6 <= len(p.tgt_tokens) <= 30 for p in pairs)
    natural = generate_pairs(2000, seed=3, length_dist="natural")
    short = sum(len(p.src_tokens) <= 12 for p in natural)
    assert short > 0.6 * len(natural)
    fixed = generate_pairs(200, seed=3, min_len=10, max_len=12, length_dist={10: 0, 11: 1, 12: 0})
    assert {len(p.src_tokens) for p in fixed} == {11}


def test_long_sentences_are_possible():
    pairs = generate_pairs(300, seed=4, min_len=40, max_len=60)
    assert max(len(p.src_tokens) for p in pairs) >= 55
    assert min(len(p.src_tokens) for p in pairs) >= 40
    assert not [p for p in pairs if french_problems(p)]


def test_same_seed_same_pairs_and_prefix_stable():
    a = generate_pairs(300, seed=7)
    assert generate_pairs(300, seed=7) == a
    assert generate_pairs(100, seed=7) == a[:100]
    assert generate_pairs(300, seed=8) != a
    assert len({p.src for p in a}) == len(a) == len({p.tgt for p in a})


FINGERPRINT_CODE = (
    "import hashlib; from attnbook.data import generate_pairs; "
    "print(hashlib.sha256('\\n'.join(p.src + '\\t' + p.tgt for p in generate_pairs(200, seed=0)).encode()).hexdigest())"
)


#: The first 200 pairs of seed 0. If the grammar or the lexicon changes on purpose, update it;
#: if it changes on another machine or Python version, the corpus is not reproducible there.
SEED0_FINGERPRINT = "8b77daed53f4a3b1f24dcc4a30752c04a8549e5b683ae9e681deefee6e52d06a"


def test_pairs_do_not_depend_on_hash_randomization_or_the_machine():
    digests = set()
    for hashseed in ("1", "12345"):
        env = {"PYTHONHASHSEED": hashseed, "PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        out = subprocess.run(
            [sys.executable, "-c", FINGERPRINT_CODE], capture_output=True, text=True, env=env, check=True
        )
        digests.add(out.stdout.strip())
    here = hashlib.sha256("\n".join(p.src + "\t" + p.tgt for p in generate_pairs(200, seed=0)).encode()).hexdigest()
    assert digests == {here} == {SEED0_FINGERPRINT}


def test_splits_are_disjoint_and_vocabularies_come_from_training():
    corpus = load_corpus(3000, seed=5)
    assert isinstance(corpus, Corpus)
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (2400, 300, 300)
    for side in ("src", "tgt"):
        sets = [{getattr(p, side) for p in corpus.split(name)} for name in ("train", "valid", "test")]
        assert not (sets[0] & sets[1]) and not (sets[0] & sets[2]) and not (sets[1] & sets[2])
    train_src = {t for p in corpus.train for t in p.src_tokens}
    assert set(corpus.src_vocab.tokens[4:]) == train_src
    assert set(corpus.tgt_vocab.tokens[4:]) == {t for p in corpus.train for t in p.tgt_tokens}
    src, tgt = corpus.tokens("valid")
    assert src[0] == corpus.valid[0].src_tokens and len(tgt) == 300
    small = load_corpus(1000, seed=5)
    assert small.train == corpus.train[: len(small.train)]  # a smaller corpus is the start of a larger one
    assert "2400 train" in repr(corpus)
    with pytest.raises(ValueError, match="unknown split"):
        corpus.split("dev")


def test_split_by_index_keeps_proportions_on_every_prefix():
    items = list(range(1000))
    for n in (10, 97, 1000):
        train, valid, test = split_by_index(items[:n], (0.8, 0.1, 0.1))
        assert abs(len(train) - 0.8 * n) <= 2 and abs(len(valid) - 0.1 * n) <= 2
    with pytest.raises(ValueError, match="summing to 1"):
        split_by_index(items, (0.5, 0.1, 0.1))


def test_lexicon_is_large_and_consistent():
    lemmas = {n.en for n in lx.NOUNS} | {a.en for a in lx.ADJECTIVES} | {v.en for v in lx.VERBS}
    assert len(lemmas) >= 300
    assert len(lx.english_words()) >= 600
    assert len({n.en for n in lx.NOUNS}) == len(lx.NOUNS)
    lex = C._lexicon()
    for n in lx.NOUNS:
        assert lex.all_adjs[n], f"no adjective fits {n}"
        assert lex.verbs_for_object[n] or lex.verbs_for_subject[n], f"{n} can be neither subject nor object"
    corpus = generate_pairs(5000, seed=1)
    assert len({t for p in corpus for t in p.src_tokens}) >= 500


def test_bad_requests_are_named():
    with pytest.raises(ValueError, match="empty corpus"):
        generate_pairs(0)
    with pytest.raises(ValueError, match="empty corpus"):
        load_corpus(n_pairs=0)
    with pytest.raises(ValueError, match="min_len must be >= 3"):
        generate_pairs(10, min_len=2)
    with pytest.raises(ValueError, match="max_len"):
        generate_pairs(10, min_len=10, max_len=5)
    with pytest.raises(ValueError, match="could only generate"):
        generate_pairs(5000, min_len=3, max_len=3)
    with pytest.raises(ValueError, match="unknown length_dist"):
        generate_pairs(10, length_dist="gaussian")
    with pytest.raises(ValueError, match="weights"):
        generate_pairs(10, min_len=3, max_len=5, length_dist=[1, 2])
    with pytest.raises(TypeError, match="integer"):
        generate_pairs(10.0)
