"""Prompt profiles of the vision engines: what the model is asked to write for the page images.

Every prompt carries the language rule: transcribe in the source language, never translate,
with VISION_LLM_LANGUAGE_HINT naming the probable language.
"""

from __future__ import annotations

_INSTRUCTIONS: dict[str, str] = {
    "general": (
        "You are given the pages of a document as images, in order. Transcribe the complete content of "
        "every page faithfully as Markdown: headings as Markdown headings, lists as lists, tables as "
        "Markdown tables (one row per table row, merged cells repeated), and figures or charts as a short "
        "description of what they show. Keep the reading order; for multi-column pages read each column "
        "top to bottom. Leave out page numbers, running headers and footers. Do not summarize, shorten, "
        "correct or comment; write only the document's content."
    ),
    "diagram": (
        "You are given the pages of a process diagram or flowchart (swimlanes, phases, steps) as images. "
        "Describe it as Markdown so that it can be searched and understood without the picture:\n"
        "1. A heading with the diagram's title (as written, if it has one).\n"
        "2. For each lane (role, department or system) a section listing, phase by phase, its steps in "
        "order, using the exact text of each box, decision and annotation.\n"
        "3. The decisions with each outcome and where it leads, and hand-overs between lanes.\n"
        "4. Finally a Mermaid flowchart in a ```mermaid code block (flowchart TD) with one node per step "
        "or decision, labelled with its text, and one edge per arrow (edge labels as written).\n"
        "Use only what the diagram shows; do not invent steps, names or arrows."
    ),
    "diagram-topology": (
        "You are given a vector flowchart as images, and the verbatim text labels of its shapes. Write only "
        "its structure as one Mermaid graph in a ```mermaid code block (flowchart TD): one node per shape, "
        "labelled with its label copied verbatim from the list (same spelling, same language), and one edge "
        "per arrow or connector in its direction, with the arrow's label if it has one. Nodes whose shapes "
        "sit inside a lane or group go in a subgraph named after it. Output nothing besides the code block."
    ),
    "figure": (
        "You are given an image of a diagram or figure. Write:\n"
        "1. Its structure as one Mermaid graph in a ```mermaid code block (flowchart TD): one node per box, "
        "shape or item, labelled with its exact text, and one edge per arrow or connection.\n"
        "2. Below it, a short description (a few sentences) of what the figure shows, using its own terms.\n"
        "Use only what the image shows; do not invent labels or connections."
    ),
    "ocr": (
        "You are given scanned pages as images, in order. Transcribe all text exactly as it appears, as plain "
        "text, page after page, keeping line breaks between paragraphs. Do not add headings, formatting, "
        "descriptions, summaries or comments; write nothing that is not printed on the pages."
    ),
}

PROFILES: frozenset[str] = frozenset(_INSTRUCTIONS)


def language_rule(language_hint: str) -> str:
    """The sentence on language every prompt ends with."""
    hint = language_hint.strip()
    probable = f" The document is probably in {hint}." if hint else ""
    return (
        f"Keep the text in the document's own language, verbatim: do not translate anything.{probable} "
        "Any heading or description you write goes in that language too."
    )


def prompt_for(profile: str, language_hint: str) -> str:
    """The full prompt of ``profile``; ``ValueError`` for an unknown profile."""
    try:
        instructions = _INSTRUCTIONS[profile]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"Unknown vision profile {profile!r}; known profiles: {known}.") from None
    return f"{instructions}\n\n{language_rule(language_hint)}"
