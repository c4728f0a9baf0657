"""The site's own words in the edition's language: the interface of the theme and of the Sphinx extensions.

A reader of the Chinese edition sees more than the translated chapters: the search box, the buttons and
their tooltips, the footer, the hints on a folded solution. Those words belong to the theme
(sphinx-book-theme, pydata-sphinx-theme), to Sphinx and to its extensions (sphinx-togglebutton,
sphinx-exercise), each with its own gettext catalogue, and the catalogues they ship for ``zh_CN`` lack some
strings and word others for Taiwan (列印成 PDF). The edition's own catalogues,
``locales/<language>/LC_MESSAGES/interface/<domain>.po`` (one per gettext domain: ``sphinx``,
``booktheme``, ``togglebutton``, ``attnbook``), hold its Chinese for them, where a translator can review
it beside the book's. At the start of a build of an edition whose language has such a folder, this module

- compiles each catalogue into the build's doctree folder and puts it *ahead* of the domain's other
  catalogues (Sphinx's ``add_message_catalog`` only appends one behind them, where it cannot correct a
  string the theme already translates);
- translates the interface strings that reach the page through configuration rather than gettext
  (:data:`CONFIGURED`: the search box's text, which Jupyter Book sets, and sphinx-togglebutton's hints,
  which it reads from its own catalogue only when it is first imported);
- puts ``templates/`` before the theme's templates: copies of the few theme components that write English
  without gettext, with their words marked for translation.

The English edition has no such folder, and its build is left exactly as it was.
"""

from __future__ import annotations

import gettext
from pathlib import Path

__all__ = ["CONFIGURED", "TEMPLATES", "catalogues", "compile_catalogues", "put_first", "translate_configured"]

#: The folder, below ``locales/<language>/LC_MESSAGES``, of the interface's catalogues.
FOLDER = "interface"
#: The book's overrides of theme templates, active where an interface catalogue exists.
TEMPLATES = Path(__file__).parent / "templates"

#: Interface strings set as configuration values: (value, key inside it or None, gettext domain that translates it).
CONFIGURED = (
    ("html_theme_options", "search_bar_text", "booktheme"),
    ("togglebutton_hint", None, "togglebutton"),
    ("togglebutton_hint_hide", None, "togglebutton"),
)


def catalogues(base: Path, language: str) -> dict[str, Path]:
    """The interface catalogues of ``language`` under the book ``base``, by gettext domain (empty if none)."""
    folder = base / "locales" / language / "LC_MESSAGES" / FOLDER
    return {path.stem: path for path in sorted(folder.glob("*.po"))}


def compile_catalogues(base: Path, language: str, into: Path) -> dict[str, Path]:
    """Compile the interface catalogues into ``into/<language>/LC_MESSAGES/<domain>.mo``; returns the .mo files.

    Fuzzy and untranslated entries are left out, as ``msgfmt`` leaves them.
    """
    import polib

    compiled = {}
    for domain, po in catalogues(base, language).items():
        mo = into / language / "LC_MESSAGES" / f"{domain}.mo"
        mo.parent.mkdir(parents=True, exist_ok=True)
        polib.pofile(str(po), wrapwidth=0).save_as_mofile(str(mo))
        compiled[domain] = mo
    return compiled


def put_first(domain: str, translation: gettext.NullTranslations) -> gettext.NullTranslations:
    """Make ``translation`` the first catalogue Sphinx consults for ``domain``, the domain's others behind it.

    Sphinx keeps one translator per gettext domain (``sphinx.locale.translators``), the catalogues
    registered later chained behind the first as fallbacks; this puts the new one at the head of the
    chain. Returns the domain's translator.
    """
    from sphinx import locale

    current = locale.get_translator(domain)
    if type(current) is not gettext.NullTranslations:  # an empty placeholder has nothing to fall back on
        translation.add_fallback(current)
    locale.translators["general", domain] = translation
    return translation


def translate_configured(config, translate) -> list[str]:
    """Translate the :data:`CONFIGURED` strings of ``config`` with ``translate(domain, text)``; returns the changed.

    A value the book's configuration sets to something else than the extension's English is translated too,
    if the catalogue has it, and left as it is otherwise.
    """
    changed = []
    for name, key, domain in CONFIGURED:
        value = getattr(config, name, None)
        if key is not None:
            if not isinstance(value, dict) or not isinstance(value.get(key), str):
                continue
            translated = translate(domain, value[key])
            if translated != value[key]:
                setattr(config, name, {**value, key: translated})
                changed.append(f"{name}.{key}")
        elif isinstance(value, str):
            translated = translate(domain, value)
            if translated != value:
                setattr(config, name, translated)
                changed.append(name)
    return changed


def install(app, config, base: Path) -> list[str]:
    """Give the build ``app`` the interface of its language, if the book ``base`` has catalogues for it.

    Connected to ``config-inited`` ahead of the extensions that read their strings there. Returns the
    domains installed (none for the English edition).
    """
    from sphinx import locale

    compiled = compile_catalogues(base, config.language or "en", Path(app.doctreedir) / "attnbook-interface")
    if not compiled:
        return []
    for domain, mo in compiled.items():
        with mo.open("rb") as file:  # a fresh object, not gettext's cached one: its fallbacks are this build's
            translation = gettext.GNUTranslations(file)
        put_first(domain, translation)
        if domain == "sphinx":
            app.translator = translation  # the templates' gettext, installed when the builder starts
    translate_configured(config, lambda domain, text: locale.get_translator(domain).gettext(text))
    config.templates_path = [str(TEMPLATES), *config.templates_path]
    return sorted(compiled)
