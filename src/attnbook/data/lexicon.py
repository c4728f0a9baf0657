"""The lexicon of the generated English→French corpus: words, their forms, and what they go with.

Each English word has exactly one French translation, so that a model can
learn the mapping from the data alone; the grammar (:mod:`attnbook.data.corpus`)
decides the forms: gender and number, conjugation, elision.

Nouns carry *tags* (``person``, ``food``, ``place``, ...). Verbs, adjectives and
prepositions say which tags they accept, which keeps the sentences sensible
("the girl eats an apple", never "the apple eats a girl").
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Noun",
    "Adjective",
    "Verb",
    "Preposition",
    "Adverb",
    "NOUNS",
    "ADJECTIVES",
    "VERBS",
    "PREPOSITIONS",
    "TIME_ADVERBS",
    "FREQUENCY_ADVERBS",
    "PRONOUNS",
    "POSSESSIVES",
    "english_words",
    "starts_with_vowel_sound",
    "noun",
    "adjective",
    "verb",
    "pronoun",
]

# --- Sounds ------------------------------------------------------------------------

_FRENCH_VOWELS = frozenset("aeiouàâäéèêëîïôöùûüœæ")
#: Words whose "h" is *aspiré*: no elision before them (le hibou, le héros).
H_ASPIRE = frozenset("héros hibou hiboux haricot haricots hache hamster honte haut haute hauts hautes".split())


def starts_with_vowel_sound(word: str) -> bool:
    """True when French elides before ``word``: a vowel, or a mute h (l'homme, but le hibou)."""
    if not word:
        return False
    first = word[0]
    if first in _FRENCH_VOWELS:
        return True
    return first == "h" and word not in H_ASPIRE


# --- Nouns -------------------------------------------------------------------------


@dataclass(frozen=True)
class Noun:
    en: str
    en_pl: str
    fr: str
    fr_pl: str
    gender: str  # "m" or "f"
    tags: frozenset[str]
    countable: bool = True  # mass nouns (bread, water) stay singular

    def __repr__(self) -> str:
        return f"Noun({self.en}={self.fr}, {self.gender})"


def _nouns(table: str) -> list[Noun]:
    """Parse ``english english-plural french french-plural gender tag,tag``;
    '+' adds s, '=' repeats, '-' is a mass noun.
    """
    nouns = []
    for line in table.strip().splitlines():
        en, en_pl, fr, fr_pl, gender, tags = line.split()
        countable = en_pl != "-"
        en_pl = en + "s" if en_pl == "+" else (en if en_pl in "=-" else en_pl)
        fr_pl = fr + "s" if fr_pl == "+" else (fr if fr_pl in "=-" else fr_pl)
        nouns.append(
            Noun(en, en_pl, fr, fr_pl, gender, frozenset(tags.split(",")) | {en}, countable)
        )  # a noun is also tagged with its name
    return nouns


# Tags: person, animal (both 'animate'), food, drink, readable, writable, song, thing
# (portable objects), small, breakable, openable, container, clothes, furniture,
# vehicle, ride (vehicles one takes), place, building, room, landmark, flyer, dog.
NOUNS: list[Noun] = _nouns(
    """
man men homme + m person,animate
woman women femme + f person,animate
boy + garçon + m person,animate
girl + fille + f person,animate
child children enfant + m person,animate
friend + ami + m person,animate
teacher + professeur + m person,animate
student + étudiant + m person,animate
doctor + médecin + m person,animate
neighbor + voisin + m person,animate
brother + frère + m person,animate
sister + sœur + f person,animate
father + père + m person,animate
mother + mère + f person,animate
uncle + oncle + m person,animate
aunt + tante + f person,animate
king + roi + m person,animate
queen + reine + f person,animate
baker + boulanger + m person,animate
singer + chanteur + m person,animate
farmer + fermier + m person,animate
soldier + soldat + m person,animate
actor + acteur + m person,animate
actress actresses actrice + f person,animate
writer + écrivain + m person,animate
lawyer + avocat + m person,animate
nurse + infirmière + f person,animate
cook + cuisinier + m person,animate
driver + chauffeur + m person,animate
guest + invité + m person,animate
pupil + élève + m person,animate
engineer + ingénieur + m person,animate
grandmother + grand-mère grands-mères f person,animate
grandfather + grand-père grands-pères m person,animate
baby babies bébé + m person,animate
hero heroes héros = m person,animate
waiter + serveur + m person,animate
painter + peintre + m person,animate
dancer + danseur + m person,animate
policeman policemen policier + m person,animate
postman postmen facteur + m person,animate
prince + prince + m person,animate
princess princesses princesse + f person,animate
wife wives épouse + f person,animate
husband + mari + m person,animate
cat + chat + m animal,animate
dog + chien + m animal,animate,dog
horse + cheval chevaux m animal,animate
bird + oiseau oiseaux m animal,animate,flyer
mouse mice souris = f animal,animate
cow + vache + f animal,animate
lamb + agneau agneaux m animal,animate
rabbit + lapin + m animal,animate
duck + canard + m animal,animate,flyer
wolf wolves loup + m animal,animate
bear + ours = m animal,animate
lion + lion + m animal,animate
tiger + tigre + m animal,animate
fox foxes renard + m animal,animate
frog + grenouille + f animal,animate
pig + cochon + m animal,animate
goat + chèvre + f animal,animate
hen + poule + f animal,animate
owl + hibou hiboux m animal,animate,flyer
elephant + éléphant + m animal,animate
monkey + singe + m animal,animate
snake + serpent + m animal,animate
butterfly butterflies papillon + m animal,animate,flyer
bee + abeille + f animal,animate,flyer
spider + araignée + f animal,animate
turtle + tortue + f animal,animate
donkey + âne + m animal,animate
squirrel + écureuil + m animal,animate
giraffe + girafe + f animal,animate
whale + baleine + f animal,animate
apple + pomme + f food,small
bread - pain - m food
cake + gâteau gâteaux m food
cheese - fromage - m food
soup - soupe - f food
egg + œuf + m food,small,breakable
orange + orange + f food,small
banana + banane + f food,small
pear + poire + f food,small
strawberry strawberries fraise + f food,small
tomato tomatoes tomate + f food,small
carrot + carotte + f food,small
pie + tarte + f food
sandwich sandwiches sandwich + m food
meat - viande - f food
rice - riz - m food
chocolate - chocolat - m food
cookie + biscuit + m food,small
lemon + citron + m food,small
cherry cherries cerise + f food,small
salad + salade + f food
pizza + pizza + f food
peach peaches pêche + f food,small
mushroom + champignon + m food,small
onion + oignon + m food,small
water - eau - f drink
milk - lait - m drink
coffee - café - m drink
tea - thé - m drink
juice - jus - m drink
wine - vin - m drink
lemonade - limonade - f drink
book + livre + m thing,readable,writable,openable
letter + lettre + f thing,readable,writable,openable,small
newspaper + journal journaux m thing,readable
story stories histoire + f readable,writable
song + chanson + f song,writable
poem + poème + m readable,writable
map + carte + f thing,readable
key + clé + f thing,small
ball + ballon + m thing,small
pen + stylo + m thing,small
pencil + crayon + m thing,small
phone + téléphone + m thing,small,breakable
computer + ordinateur + m thing,breakable
cup + tasse + f thing,small,breakable,container
glass glasses verre + m thing,small,breakable,container
plate + assiette + f thing,breakable
bottle + bouteille + f thing,breakable,openable,container
bag + sac + m thing,openable,container,holder
box boxes boîte + f thing,openable,container,holder
umbrella + parapluie + m thing,openable
ticket + billet + m thing,small
gift + cadeau cadeaux m thing,openable
picture + photo + f thing
painting + tableau tableaux m thing
clock + horloge + f thing,breakable
lamp + lampe + f thing,breakable
knife knives couteau couteaux m thing,small
spoon + cuillère + f thing,small
fork + fourchette + f thing,small
ring + bague + f thing,small
toy + jouet + m thing,small,breakable
flower + fleur + f thing,small
candle + bougie + f thing,small
mirror + miroir + m thing,breakable
wallet + portefeuille + m thing,small
notebook + cahier + m thing,writable
hat + chapeau chapeaux m thing,clothes
shirt + chemise + f thing,clothes
dress dresses robe + f thing,clothes
shoe + chaussure + f thing,clothes
coat + manteau manteaux m thing,clothes
scarf scarves écharpe + f thing,clothes
jacket + veste + f thing,clothes
skirt + jupe + f thing,clothes
sweater + pull + m thing,clothes
glove + gant + m thing,clothes,small
table + table + f furniture
chair + chaise + f furniture,breakable
bed + lit + m furniture
sofa + canapé + m furniture
desk + bureau bureaux m furniture
shelf shelves étagère + f furniture
door + porte + f door,openable
window + fenêtre + f door,openable,breakable
wall + mur + m landmark
tree + arbre + m landmark
car + voiture + f vehicle,ride,container
bus buses bus = m vehicle,ride
train + train + m vehicle,ride
bike + vélo + m vehicle
boat + bateau bateaux m vehicle,ride
plane + avion + m vehicle,ride
truck + camion + m vehicle
taxi + taxi + m vehicle,ride
house + maison + f place,building
garden + jardin + m place
school + école + f place,building
park + parc + m place
city cities ville + f place
village + village + m place
street + rue + f place,surface
kitchen + cuisine + f place,room
room + chambre + f place,room
forest + forêt + f place
river + rivière + f place
beach beaches plage + f place,surface
station + gare + f place,building
library libraries bibliothèque + f place,building
hospital + hôpital hôpitaux m place,building
church churches église + f place,building
shop + magasin + m place,building
market + marché + m place
restaurant + restaurant + m place,building
museum + musée + m place,building
castle + château châteaux m place,building
field + champ + m place
mountain + montagne + f place
lake + lac + m place
bridge + pont + m place,surface,landmark
island + île + f place,surface
hotel + hôtel + m place,building
farm + ferme + f place,building
airport + aéroport + m place,building
theater + théâtre + m place,building
bakery bakeries boulangerie + f place,building
zoo + zoo + m place
square + place + f place,surface
road + route + f place,surface
sea - mer - f place
"""
)

# --- Adjectives --------------------------------------------------------------------


@dataclass(frozen=True)
class Adjective:
    en: str
    forms: tuple[str, str, str, str]  # masculine singular, feminine singular, masculine plural, feminine plural
    before: bool  # placed before the noun in French (petit, grand, beau, ...)
    tags: frozenset[str]
    vowel_form: str | None = None  # masculine singular before a vowel: bel, vieil, nouvel

    def form(self, gender: str, plural: bool) -> str:
        return self.forms[(2 if plural else 0) + (1 if gender == "f" else 0)]

    def __repr__(self) -> str:
        return f"Adjective({self.en}={self.forms[0]})"


def _adjectives(table: str, before: bool) -> list[Adjective]:
    """Parse ``english ms fs mp fp tag,tag [vowel-form]``; '+' applies the regular rule."""
    out = []
    for line in table.strip().splitlines():
        parts = line.split()
        en, ms, fs, mp, fp, tags = parts[:6]
        vowel_form = parts[6] if len(parts) > 6 else None
        if fs == "+":
            fs = ms if ms.endswith("e") else ms + "e"
        if mp == "+":
            mp = ms if ms.endswith(("s", "x")) else ms + "s"
        if fp == "+":
            fp = fs + "s"
        out.append(Adjective(en, (ms, fs, mp, fp), before, frozenset(tags.split(",")), vowel_form))
    return out


_CONCRETE = "person,animal,thing,food,vehicle,furniture,place,door,landmark"
ADJECTIVES: list[Adjective] = _adjectives(
    f"""
small petit + + + {_CONCRETE}
big grand + + + {_CONCRETE}
good bon bonne + + person,animal,food,drink,readable,song,thing,place
beautiful beau belle beaux belles person,animal,thing,place,vehicle,furniture,song,readable,door,landmark bel
young jeune + + + person,animal,landmark
old vieux vieille vieux vieilles person,animal,thing,place,vehicle,furniture,door,landmark vieil
new nouveau nouvelle nouveaux nouvelles person,thing,place,vehicle,furniture,readable,song,door nouvel
pretty joli + + + person,animal,thing,place,door
bad mauvais mauvaise mauvais mauvaises person,food,drink,readable,song
fat gros grosse gros grosses animal,thing,food,vehicle,landmark
long long longue longs longues readable,song,thing,vehicle
""",
    before=True,
) + _adjectives(
    """
red rouge + + + thing,vehicle,furniture,building,door,food
blue bleu + + + thing,vehicle,furniture,building,door
green vert + + + thing,vehicle,furniture,building,door,food
black noir + + + thing,vehicle,furniture,animal,door
white blanc blanche blancs blanches thing,vehicle,furniture,animal,building,door,drink
yellow jaune + + + thing,vehicle,furniture,building,door,food
gray gris grise gris grises thing,vehicle,animal,building,door
brown brun + + + animal,thing,furniture
pink rose + + + thing,vehicle,furniture,building,door,animal
happy heureux heureuse heureux heureuses person,animal
sad triste + + + person,animal,song,readable
tired fatigué + + + person,animal
hungry affamé + + + person,animal
angry fâché + + + person
cold froid + + + food,drink,place
hot chaud + + + food,drink
clean propre + + + thing,furniture,place,vehicle,door
dirty sale + + + thing,furniture,place,vehicle,animal,door
heavy lourd + + + thing,furniture
light léger légère légers légères thing
empty vide + + + container,place,building
full plein + + + container,building
easy facile + + + readable,song
difficult difficile + + + readable,song
strange étrange + + + person,animal,thing,place,song,readable,food
famous célèbre + + + person,place,song,readable,building
rich riche + + + person,food
quiet calme + + + person,animal,place
noisy bruyant + + + person,animal,place,vehicle
kind gentil gentille gentils gentilles person,animal
clever intelligent + + + person,animal
lazy paresseux paresseuse paresseux paresseuses person,animal
brave courageux courageuse courageux courageuses person,animal
shy timide + + + person,animal
polite poli + + + person
funny drôle + + + person,animal,readable,song
round rond + + + thing,furniture,food
soft doux douce doux douces thing,animal,food,drink
dark sombre + + + place
expensive cher chère chers chères thing,vehicle,food,drink,building
broken cassé + + + breakable,vehicle,furniture
open ouvert + + + openable,building
closed fermé + + + openable,building
wet mouillé + + + animal,thing
dry sec sèche secs sèches thing,food,place
sweet sucré + + + food,drink
fresh frais fraîche frais fraîches food,drink
sick malade + + + person,animal
busy occupé + + + person,place
modern moderne + + + building,vehicle,thing
""",
    before=False,
)

# --- Verbs -------------------------------------------------------------------------


def er(infinitive: str) -> tuple[tuple[str, ...], str]:
    """Present tense (je, tu, il, nous, vous, ils) and past participle of a regular -er verb."""
    stem = infinitive[:-2]
    if stem.endswith("g"):
        nous = stem + "eons"  # mangeons
    elif stem.endswith("c"):
        nous = stem[:-1] + "çons"  # lançons
    else:
        nous = stem + "ons"
    return (stem + "e", stem + "es", stem + "e", nous, stem + "ez", stem + "ent"), stem + "é"


def _irregular(present: str, participle: str) -> tuple[tuple[str, ...], str]:
    forms = tuple(present.split())
    assert len(forms) == 6, present
    return forms, participle


@dataclass(frozen=True)
class Verb:
    """A verb: English forms, French forms, and the frame it builds.

    ``kind`` is one of ``"tr"`` (takes a direct object), ``"intr"``, ``"motion"``
    (conjugated with *être*, with an optional or required place).
    """

    en: str  # base form
    en_3sg: str
    en_past: str
    fr_inf: str
    fr_present: tuple[str, ...]  # je, tu, il/elle, nous, vous, ils/elles
    fr_participle: str
    kind: str
    subj: frozenset[str]
    obj: frozenset[str] = frozenset()
    obj_optional: bool = False
    particle: str | None = None  # English particle: look FOR, listen TO, come BACK
    recipient: bool = False  # takes "to" + a person: give the book to the girl
    aux: str = "avoir"
    place_prep: tuple[str, str] | None = None  # (English, French): go TO = à, come FROM = de
    place_required: bool = False
    place_tags: frozenset[str] = frozenset()
    fr_place_only: str | None = None  # French preposition with no English one: enter the house = entrer DANS

    def __repr__(self) -> str:
        return f"Verb({self.en}={self.fr_inf})"


def _t(tags: str) -> frozenset[str]:
    return frozenset(tags.split(","))


_ALL_OBJECTS = "person,animal,thing,food,drink,vehicle,place,furniture,song,readable"
_PLACES = _t("place")


def _verbs() -> list[Verb]:
    V = Verb
    person, animate = _t("person"), _t("animate")
    # fmt: off
    return [
        # transitive
        V("eat", "eats", "ate", "manger", *er("manger"), "tr", animate, _t("food"), obj_optional=True),
        V("drink", "drinks", "drank", "boire", *_irregular("bois bois boit buvons buvez boivent", "bu"), "tr", animate, _t("drink"), obj_optional=True),
        V("see", "sees", "saw", "voir", *_irregular("vois vois voit voyons voyez voient", "vu"), "tr", animate, _t("person,animal,thing,food,vehicle,place,furniture,landmark")),
        V("watch", "watches", "watched", "regarder", *er("regarder"), "tr", person, _t("person,animal,vehicle,thing")),
        V("like", "likes", "liked", "aimer", *er("aimer"), "tr", person, _t(_ALL_OBJECTS)),
        V("love", "loves", "loved", "adorer", *er("adorer"), "tr", person, _t("food,drink,animal,place,song,readable")),
        V("want", "wants", "wanted", "vouloir", *_irregular("veux veux veut voulons voulez veulent", "voulu"), "tr", animate, _t("thing,food,drink,vehicle")),
        V("have", "has", "had", "avoir", *_irregular("ai as a avons avez ont", "eu"), "tr", person, _t("thing,animal,vehicle")),
        V("take", "takes", "took", "prendre", *_irregular("prends prends prend prenons prenez prennent", "pris"), "tr", person, _t("small,food,ride")),
        V("buy", "buys", "bought", "acheter", *_irregular("achète achètes achète achetons achetez achètent", "acheté"), "tr", person, _t("thing,food,drink,vehicle")),
        V("sell", "sells", "sold", "vendre", *_irregular("vends vends vend vendons vendez vendent", "vendu"), "tr", person, _t("thing,food,drink,vehicle,animal"), recipient=True),
        V("find", "finds", "found", "trouver", *er("trouver"), "tr", animate, _t("thing,animal,person,food")),
        V("look", "looks", "looked", "chercher", *er("chercher"), "tr", animate, _t("thing,person,animal"), particle="for"),
        V("read", "reads", "read", "lire", *_irregular("lis lis lit lisons lisez lisent", "lu"), "tr", person, _t("readable"), obj_optional=True, recipient=True),
        V("write", "writes", "wrote", "écrire", *_irregular("écris écris écrit écrivons écrivez écrivent", "écrit"), "tr", person, _t("writable"), obj_optional=True, recipient=True),
        V("open", "opens", "opened", "ouvrir", *_irregular("ouvre ouvres ouvre ouvrons ouvrez ouvrent", "ouvert"), "tr", person, _t("openable")),
        V("close", "closes", "closed", "fermer", *er("fermer"), "tr", person, _t("openable")),
        V("wash", "washes", "washed", "laver", *er("laver"), "tr", person, _t("clothes,vehicle,animal,container,furniture")),
        V("clean", "cleans", "cleaned", "nettoyer", *_irregular("nettoie nettoies nettoie nettoyons nettoyez nettoient", "nettoyé"), "tr", person, _t("room,furniture,vehicle,building,thing")),
        V("carry", "carries", "carried", "porter", *er("porter"), "tr", animate, _t("thing,food")),
        V("bring", "brings", "brought", "apporter", *er("apporter"), "tr", person, _t("thing,food,drink"), recipient=True),
        V("hear", "hears", "heard", "entendre", *_irregular("entends entends entend entendons entendez entendent", "entendu"), "tr", animate, _t("person,animal,song,vehicle")),
        V("know", "knows", "knew", "connaître", *_irregular("connais connais connaît connaissons connaissez connaissent", "connu"), "tr", person, _t("person,place,song,readable")),
        V("meet", "meets", "met", "rencontrer", *er("rencontrer"), "tr", person, person),
        V("help", "helps", "helped", "aider", *er("aider"), "tr", person, _t("person,animal")),
        V("call", "calls", "called", "appeler", *_irregular("appelle appelles appelle appelons appelez appellent", "appelé"), "tr", person, _t("person,animal")),
        V("wait", "waits", "waited", "attendre", *_irregular("attends attends attend attendons attendez attendent", "attendu"), "tr", animate, _t("person,ride"), particle="for"),
        V("visit", "visits", "visited", "visiter", *er("visiter"), "tr", person, _t("building,place")),
        V("paint", "paints", "painted", "peindre", *_irregular("peins peins peint peignons peignez peignent", "peint"), "tr", person, _t("furniture,door,landmark,building,thing"), obj_optional=True),
        V("cook", "cooks", "cooked", "cuisiner", *er("cuisiner"), "tr", person, _t("food"), obj_optional=True),
        V("cut", "cuts", "cut", "couper", *er("couper"), "tr", person, _t("food")),
        V("break", "breaks", "broke", "casser", *er("casser"), "tr", animate, _t("breakable")),
        V("throw", "throws", "threw", "lancer", *er("lancer"), "tr", person, _t("small")),
        V("catch", "catches", "caught", "attraper", *er("attraper"), "tr", animate, _t("animal,small,ride")),
        V("follow", "follows", "followed", "suivre", *_irregular("suis suis suit suivons suivez suivent", "suivi"), "tr", animate, _t("person,animal,vehicle")),
        V("forget", "forgets", "forgot", "oublier", *er("oublier"), "tr", person, _t("small,song,readable,clothes")),
        V("lose", "loses", "lost", "perdre", *_irregular("perds perds perd perdons perdez perdent", "perdu"), "tr", person, _t("small,clothes")),
        V("finish", "finishes", "finished", "finir", *_irregular("finis finis finit finissons finissez finissent", "fini"), "tr", person, _t("food,drink,readable")),
        V("choose", "chooses", "chose", "choisir", *_irregular("choisis choisis choisit choisissons choisissez choisissent", "choisi"), "tr", person, _t("thing,food,drink,animal,vehicle")),
        V("fix", "fixes", "fixed", "réparer", *er("réparer"), "tr", person, _t("breakable,vehicle,furniture,door")),
        V("draw", "draws", "drew", "dessiner", *er("dessiner"), "tr", person, _t("person,animal,thing,vehicle,landmark,building"), obj_optional=True),
        V("push", "pushes", "pushed", "pousser", *er("pousser"), "tr", animate, _t("vehicle,furniture,door,small")),
        V("hide", "hides", "hid", "cacher", *er("cacher"), "tr", animate, _t("small,food")),
        V("keep", "keeps", "kept", "garder", *er("garder"), "tr", person, _t("thing,animal")),
        V("listen", "listens", "listened", "écouter", *er("écouter"), "tr", animate, _t("person,song"), particle="to", obj_optional=True),
        V("fill", "fills", "filled", "remplir", *_irregular("remplis remplis remplit remplissons remplissez remplissent", "rempli"), "tr", person, _t("container")),
        V("build", "builds", "built", "construire", *_irregular("construis construis construit construisons construisez construisent", "construit"), "tr", person, _t("building,furniture")),
        V("give", "gives", "gave", "donner", *er("donner"), "tr", person, _t("thing,food,drink"), recipient=True),
        V("show", "shows", "showed", "montrer", *er("montrer"), "tr", person, _t("thing,readable,animal"), recipient=True),
        V("send", "sends", "sent", "envoyer", *_irregular("envoie envoies envoie envoyons envoyez envoient", "envoyé"), "tr", person, _t("readable,thing"), recipient=True),
        V("offer", "offers", "offered", "offrir", *_irregular("offre offres offre offrons offrez offrent", "offert"), "tr", person, _t("thing,food,drink"), recipient=True),
        V("lend", "lends", "lent", "prêter", *er("prêter"), "tr", person, _t("thing,vehicle"), recipient=True),
        V("sing", "sings", "sang", "chanter", *er("chanter"), "tr", _t("person,bird"), _t("song"), obj_optional=True),
        # intransitive
        V("sleep", "sleeps", "slept", "dormir", *_irregular("dors dors dort dormons dormez dorment", "dormi"), "intr", animate),
        V("run", "runs", "ran", "courir", *_irregular("cours cours court courons courez courent", "couru"), "intr", animate),
        V("walk", "walks", "walked", "marcher", *er("marcher"), "intr", animate),
        V("dance", "dances", "danced", "danser", *er("danser"), "intr", person),
        V("laugh", "laughs", "laughed", "rire", *_irregular("ris ris rit rions riez rient", "ri"), "intr", person),
        V("cry", "cries", "cried", "pleurer", *er("pleurer"), "intr", person),
        V("swim", "swims", "swam", "nager", *er("nager"), "intr", animate),
        V("work", "works", "worked", "travailler", *er("travailler"), "intr", person),
        V("play", "plays", "played", "jouer", *er("jouer"), "intr", animate),
        V("smile", "smiles", "smiled", "sourire", *_irregular("souris souris sourit sourions souriez sourient", "souri"), "intr", person),
        V("jump", "jumps", "jumped", "sauter", *er("sauter"), "intr", animate),
        V("talk", "talks", "talked", "parler", *er("parler"), "intr", person),
        V("shout", "shouts", "shouted", "crier", *er("crier"), "intr", person),
        V("travel", "travels", "traveled", "voyager", *er("voyager"), "intr", person),
        V("study", "studies", "studied", "étudier", *er("étudier"), "intr", person),
        V("win", "wins", "won", "gagner", *er("gagner"), "intr", person),
        V("grow", "grows", "grew", "grandir", *_irregular("grandis grandis grandit grandissons grandissez grandissent", "grandi"), "intr", animate),
        V("fly", "flies", "flew", "voler", *er("voler"), "intr", _t("flyer")),
        V("bark", "barks", "barked", "aboyer", *_irregular("aboie aboies aboie aboyons aboyez aboient", "aboyé"), "intr", _t("dog")),
        # motion, conjugated with être in the passé composé
        V("go", "goes", "went", "aller", *_irregular("vais vas va allons allez vont", "allé"), "motion", animate, aux="être", place_prep=("to", "à"), place_required=True, place_tags=_PLACES),
        V("come", "comes", "came", "venir", *_irregular("viens viens vient venons venez viennent", "venu"), "motion", animate, aux="être", place_prep=("from", "de"), place_tags=_PLACES),
        V("arrive", "arrives", "arrived", "arriver", *er("arriver"), "motion", animate, aux="être", place_prep=("at", "à"), place_tags=_PLACES),
        V("leave", "leaves", "left", "partir", *_irregular("pars pars part partons partez partent", "parti"), "motion", animate, aux="être"),
        V("fall", "falls", "fell", "tomber", *er("tomber"), "motion", animate, aux="être", place_prep=("in", "dans"), place_tags=_t("river,lake")),
        V("stay", "stays", "stayed", "rester", *er("rester"), "motion", animate, aux="être", place_prep=("in", "dans"), place_tags=_t("room,building,garden")),
        V("enter", "enters", "entered", "entrer", *er("entrer"), "motion", animate, aux="être", place_required=True, place_tags=_t("building,room,garden"), fr_place_only="dans"),
        V("come", "comes", "came", "revenir", *_irregular("reviens reviens revient revenons revenez reviennent", "revenu"), "motion", animate, particle="back", aux="être", place_prep=("from", "de"), place_tags=_PLACES),
        V("go", "goes", "went", "sortir", *_irregular("sors sors sort sortons sortez sortent", "sorti"), "motion", animate, particle="out", aux="être", place_prep=("of", "de"), place_tags=_t("building,room")),
    ]
    # fmt: on


VERBS: list[Verb] = _verbs()

#: être, the copula: "the cat is small" = "le chat est petit".
ETRE = ("suis", "es", "est", "sommes", "êtes", "sont")
AVOIR = ("ai", "as", "a", "avons", "avez", "ont")
ALLER = ("vais", "vas", "va", "allons", "allez", "vont")

# --- Prepositions, adverbs, pronouns, determiners -----------------------------------


@dataclass(frozen=True)
class Preposition:
    en: tuple[str, ...]
    fr: tuple[str, ...]
    tags: frozenset[str]  # what its object may be

    def __repr__(self) -> str:
        return f"Preposition({' '.join(self.en)}={' '.join(self.fr)})"


def _p(en: str, fr: str, tags: str) -> Preposition:
    return Preposition(tuple(en.split()), tuple(fr.split()), _t(tags))


#: Where something is or happens.
PREPOSITIONS: list[Preposition] = [
    _p("in", "dans", "room,building,garden,vehicle,holder,forest,park,city,village"),
    _p("on", "sur", "furniture,surface"),
    _p("under", "sous", "furniture,bridge,tree"),
    _p("near", "près de", "place,building,furniture,landmark,vehicle,person"),
    _p("next to", "à côté de", "place,building,furniture,landmark,vehicle,person"),
    _p("behind", "derrière", "building,furniture,landmark,vehicle,person,door"),
    _p("in front of", "devant", "building,furniture,landmark,vehicle,person,door"),
    _p("at", "à", "station,airport,market,school,beach,zoo,museum,restaurant,library,hospital"),
]
#: With whom: "with my brother", "without her dog".
COMPANION_PREPOSITIONS: list[Preposition] = [
    _p("with", "avec", "person,animal"),
    _p("without", "sans", "person,animal"),
]
#: For whom something is done or meant.
BENEFICIARY = _p("for", "pour", "person")
#: What a person or an animal has with it: "the girl with the red hat".
WITH_THING = _p("with", "avec", "clothes,animal,small")


@dataclass(frozen=True)
class Adverb:
    en: tuple[str, ...]
    fr: tuple[str, ...]
    tenses: frozenset[str]


def _a(en: str, fr: str, tenses: str) -> Adverb:
    return Adverb(tuple(en.split()), tuple(fr.split()), _t(tenses))


#: When: at the end of the clause, in both languages.
TIME_ADVERBS: list[Adverb] = [
    _a("today", "aujourd'hui", "present,past,future"),
    _a("now", "maintenant", "present"),
    _a("every day", "tous les jours", "present"),
    _a("every morning", "tous les matins", "present"),
    _a("every evening", "tous les soirs", "present"),
    _a("yesterday", "hier", "past"),
    _a("last week", "la semaine dernière", "past"),
    _a("last year", "l' année dernière", "past"),
    _a("last night", "hier soir", "past"),
    _a("this morning", "ce matin", "past,future"),
    _a("tomorrow", "demain", "future"),
    _a("next week", "la semaine prochaine", "future"),
    _a("next year", "l' année prochaine", "future"),
    _a("tonight", "ce soir", "present,future"),
    _a("soon", "bientôt", "future"),
]
#: How often: before the verb in English, after the conjugated verb in French.
FREQUENCY_ADVERBS: list[Adverb] = [
    _a("often", "souvent", "present,past"),
    _a("always", "toujours", "present,past"),
    _a("sometimes", "parfois", "present,past"),
    _a("rarely", "rarement", "present,past"),
]


@dataclass(frozen=True)
class Pronoun:
    en: str
    fr: str
    person: int  # index into the six French forms: je tu il nous vous ils
    plural: bool
    gender: str

    def __repr__(self) -> str:
        return f"Pronoun({self.en}={self.fr})"


#: Subject pronouns. "you" is always the familiar singular "tu", "they" the masculine "ils":
#: one translation for each English word.
PRONOUNS: list[Pronoun] = [
    Pronoun("i", "je", 0, False, "m"),
    Pronoun("you", "tu", 1, False, "m"),
    Pronoun("he", "il", 2, False, "m"),
    Pronoun("she", "elle", 2, False, "f"),
    Pronoun("we", "nous", 3, True, "m"),
    Pronoun("they", "ils", 5, True, "m"),
]

#: Possessive determiners: English -> French (masculine singular, feminine singular, plural).
#: French agrees with the thing possessed, not the possessor: "his mother" = "sa mère".
POSSESSIVES: dict[str, tuple[str, str, str]] = {
    "my": ("mon", "ma", "mes"),
    "your": ("ton", "ta", "tes"),
    "his": ("son", "sa", "ses"),
    "her": ("son", "sa", "ses"),
    "our": ("notre", "notre", "nos"),
    "their": ("leur", "leur", "leurs"),
}
NUMBERS: dict[str, str] = {"two": "deux", "three": "trois", "four": "quatre"}
CONJUNCTIONS: list[tuple[str, tuple[str, ...], bool]] = [
    # English, French, preceded by a comma
    ("and", ("et",), False),
    ("but", ("mais",), True),
    ("because", ("parce", "que"), False),
]

_FUNCTION_WORDS = (
    "the a an this these i you he she we they who that and but because not do does did "
    "am is are was were be going to very 's"
).split()


def english_words() -> list[str]:
    """Every English word the corpus can use (all forms), sorted."""
    words = set(_FUNCTION_WORDS)
    for noun in NOUNS:
        words.update((noun.en, noun.en_pl))
    for adj in ADJECTIVES:
        words.add(adj.en)
    for verb in VERBS:
        words.update((verb.en, verb.en_3sg, verb.en_past))
        words.update(w for w in (verb.particle, verb.place_prep[0] if verb.place_prep else None) if w)
    for prep in [*PREPOSITIONS, *COMPANION_PREPOSITIONS, BENEFICIARY, WITH_THING]:
        words.update(prep.en)
    for adverb in [*TIME_ADVERBS, *FREQUENCY_ADVERBS]:
        words.update(adverb.en)
    words.update(p.en for p in PRONOUNS)
    words.update(POSSESSIVES)
    words.update(NUMBERS)
    words.update(c[0] for c in CONJUNCTIONS)
    words.add("never")
    return sorted(words)


def _find(entries, field: str, value: str, what: str):
    for entry in entries:
        if getattr(entry, field) == value:
            return entry
    raise KeyError(f"no {what} {value!r} in the lexicon")


def noun(en: str) -> Noun:
    """The noun whose English singular is ``en``."""
    return _find(NOUNS, "en", en, "noun")


def adjective(en: str) -> Adjective:
    """The adjective whose English form is ``en``."""
    return _find(ADJECTIVES, "en", en, "adjective")


def verb(fr_infinitive: str) -> Verb:
    """The verb with this French infinitive (English is ambiguous: come = venir, come back = revenir)."""
    return _find(VERBS, "fr_inf", fr_infinitive, "verb")


def pronoun(en: str) -> Pronoun:
    """The subject pronoun ``en`` (i, you, he, she, we, they)."""
    return _find(PRONOUNS, "en", en, "pronoun")
