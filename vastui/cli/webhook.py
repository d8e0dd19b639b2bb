"""The watch's webhook: each alert as a JSON POST in the shape Slack-compatible incoming webhooks take (``text``,
which Slack, Mattermost and Rocket.Chat show; ``vastui`` carries the alert's fields for a receiver of one's own).

A webhook's URL is its credential (whoever has it can post to the channel): it is held as a ``Secret`` and never
shown; messages name only its scheme and host.
"""

from __future__ import annotations

import urllib.parse
from types import TracebackType

import httpx

from vastui.config import Secret
from vastui.errors import WebhookError
from vastui.store import WatchAlert


def webhook_body(alert: WatchAlert) -> dict[str, object]:
    return {"text": alert.text,
            "vastui": {"alert_id": alert.row_id, "key": alert.alert_key, "kind": alert.kind,
                       "instance_id": alert.instance_id, "raised_at": alert.raised_at}}


def shown_host(url: Secret) -> str:
    """What a message may say of the webhook: ``https://hooks.example.com`` (never its path or query)."""
    parts = urllib.parse.urlsplit(url.reveal())
    return f"{parts.scheme}://{parts.hostname or '?'}"


class WebhookSink:
    """Posts alerts to one webhook (``async with``); ``deliver`` raises WebhookError unless it answered 2xx."""

    def __init__(self, url: Secret, *, timeout_s: float = 10.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._url = url
        self.shown = shown_host(url)
        self._client = httpx.AsyncClient(timeout=timeout_s, transport=transport, follow_redirects=False)

    async def __aenter__(self) -> WebhookSink:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._client.aclose()

    async def deliver(self, alert: WatchAlert) -> None:
        try:
            reply = await self._client.post(self._url.reveal(), json=webhook_body(alert))
        except httpx.HTTPError as exc:   # its text can hold the URL: only its kind is told
            raise WebhookError(f"the webhook at {self.shown} did not answer ({type(exc).__name__})") from None
        if not 200 <= reply.status_code < 300:
            raise WebhookError(f"the webhook at {self.shown} answered HTTP {reply.status_code}")
