"""ISO 639-3 -> ISO 639-1 codes: the payload index ``meta.languages`` holds two-letter codes."""

from __future__ import annotations

_ISO3_TO_ISO1: dict[str, str] = {
    "afr": "af", "ara": "ar", "aze": "az", "bel": "be", "ben": "bn", "bos": "bs", "bul": "bg",
    "cat": "ca", "ces": "cs", "cym": "cy", "dan": "da", "deu": "de", "ell": "el", "eng": "en",
    "epo": "eo", "est": "et", "eus": "eu", "fas": "fa", "fin": "fi", "fra": "fr", "gle": "ga",
    "guj": "gu", "heb": "he", "hin": "hi", "hrv": "hr", "hun": "hu", "hye": "hy", "ind": "id",
    "isl": "is", "ita": "it", "jav": "jv", "jpn": "ja", "kat": "ka", "kaz": "kk", "kor": "ko",
    "lat": "la", "lav": "lv", "lit": "lt", "mar": "mr", "mkd": "mk", "mon": "mn", "msa": "ms",
    "mya": "my", "nep": "ne", "nld": "nl", "nno": "nn", "nob": "nb", "nor": "no", "pan": "pa",
    "pol": "pl", "por": "pt", "ron": "ro", "rus": "ru", "slk": "sk", "slv": "sl", "sna": "sn",
    "som": "so", "spa": "es", "sqi": "sq", "srp": "sr", "swa": "sw", "swe": "sv", "tam": "ta",
    "tel": "te", "tgl": "tl", "tha": "th", "tur": "tr", "ukr": "uk", "urd": "ur", "uzb": "uz",
    "vie": "vi", "yor": "yo", "zho": "zh", "zul": "zu", "cmn": "zh",
}  # fmt: skip


def to_iso639_1(codes: list[str] | None) -> list[str]:
    """Two-letter codes where one exists (unknown codes pass through lower-cased), de-duplicated."""
    result: list[str] = []
    for code in codes or []:
        normalized = code.strip().lower()
        if not normalized:
            continue
        short = _ISO3_TO_ISO1.get(normalized, normalized)
        if short not in result:
            result.append(short)
    return result
