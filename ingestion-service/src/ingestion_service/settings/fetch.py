"""Documents fetched from a URL (the web loader, ingest by ``url``): what may be reached, how much
is read and for how long."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import Field, field_validator

from shared_contract.settings import Fingerprint, SettingsGroup

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(value: str) -> tuple[IPNetwork, ...]:
    """Comma-separated CIDRs or single addresses (``10.0.0.0/8, 127.0.0.1, fd00::/8``)."""
    networks: list[IPNetwork] = []
    for part in value.split(","):
        text = part.strip()
        if not text:
            continue
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError as exc:
            raise ValueError("must be comma-separated IP networks in CIDR notation (10.0.0.0/8, fd00::/8)") from exc
    return tuple(networks)


class UrlFetchSettings(SettingsGroup):
    """The fetcher's refusals and limits (``adapters/url_fetcher.py``)."""

    # URL fetching.
    url_fetch_enabled: Annotated[bool, Fingerprint.OPERATIONAL] = Field(
        default=True,
        description="Whether the service fetches URLs at all (POST /process, ingest by url, rag ingest https://); "
        "false refuses every URL with 422 URL_NOT_ALLOWED.",
    )
    url_fetch_allow_networks: Annotated[str, Fingerprint.OPERATIONAL] = Field(
        default="",
        description="Comma-separated CIDRs that may be fetched although private, loopback, link-local or "
        "otherwise not public (10.0.0.0/8, 127.0.0.1/32); empty = public addresses only.",
    )
    url_fetch_max_bytes: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=25 * 1024 * 1024, gt=0, description="Bytes one fetched document may have (Content-Length or counted)."
    )
    url_fetch_timeout_seconds: Annotated[float, Fingerprint.OPERATIONAL] = Field(
        default=30.0, gt=0, description="Wall time of one fetch: resolving, connecting, every redirect and the body."
    )
    url_fetch_max_redirects: Annotated[int, Fingerprint.OPERATIONAL] = Field(
        default=5, ge=0, le=20, description="Redirects one fetch follows, each target checked like the first URL."
    )

    @field_validator("url_fetch_allow_networks")
    @classmethod
    def _allow_networks_parse(cls, value: str) -> str:
        parse_networks(value)
        return value

    @property
    def url_fetch_networks(self) -> tuple[IPNetwork, ...]:
        """URL_FETCH_ALLOW_NETWORKS parsed."""
        return parse_networks(self.url_fetch_allow_networks)
