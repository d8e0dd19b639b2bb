"""Fuzzing the client over a real loopback socket: a peer that answers with broken HTTP — garbage bytes, a status
line cut short, a Content-Length that lies, a chunked body that ends early, a connection closed mid-answer. Every
call ends in its result or one ``VastuiError`` in one bounded line, without the API key."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from tests.fakes import FakeClock
from tests.fuzz.fuzz_support import assert_one_line
from vastui.approval import Action, Approval, ApprovalRequest, offer_target
from vastui.config import Secret
from vastui.errors import VastuiError
from vastui.vast.client import HttpVastClient

KEY = "fuzz-socket-key-c0ffee42"
JSON_USER = b'{"id": 7, "username": "op"}'
HEADS = [b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 500 Oops\r\n", b"HTTP/1.0 404 Not Found\r\n", b"HTTP/1.1 999 Odd\r\n",
         b"HTTP/1.1 200\r\n", b"HTTP/2 200\r\n", b"HTTP/1.1 abc\r\n", b"SSH-2.0-OpenSSH_9.6\r\n", b"\x16\x03\x01\x02\x00",
         b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/\r\n", b""]
HEADERS = [b"Content-Type: application/json\r\n", b"Content-Length: 5\r\n", b"Content-Length: 99999\r\n",
           b"Content-Length: -1\r\n", b"Content-Length: abc\r\n", b"Transfer-Encoding: chunked\r\n",
           b"Content-Encoding: gzip\r\n", b"Retry-After: 1\r\n", b"X-Junk: \xff\xfe\r\n", b"NoColonHeader\r\n",
           b"Connection: close\r\n"]
BODIES = [JSON_USER, b"", b"5\r\nhello\r\n", b"ff\r\nshort", b"0\r\n\r\n", b"\x1f\x8b\x08\x00garbage", b"{", b"[" * 3000,
          b'{"offers": "many"}', b'{"instances": [], "next_token": null}', b"\x00" * 64]

raw_replies = st.builds(lambda head, headers, blank, body: head + b"".join(headers) + (b"\r\n" if blank else b"")
                        + body, st.sampled_from(HEADS), st.lists(st.sampled_from(HEADERS), max_size=3),
                        st.booleans(), st.sampled_from(BODIES)) | st.binary(max_size=120)


async def _serve_once(raw: bytes) -> tuple[asyncio.AbstractServer, str]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(raw)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


@given(raw=raw_replies, call=st.sampled_from(["get_user", "list_instances", "create_instance"]))
async def test_any_raw_answer_is_a_result_or_one_vastui_error(raw: bytes, call: str) -> None:
    server, url = await _serve_once(raw)
    try:
        async with HttpVastClient(base_url=url, api_key=Secret(KEY), clock=FakeClock(), timeout_s=5.0,
                                  max_attempts=1) as client:
            try:
                if call == "get_user":
                    await client.get_user()
                elif call == "list_instances":
                    await client.list_instances()
                else:
                    approval = Approval(ApprovalRequest(action=Action.CREATE_INSTANCE, target=offer_target(1),
                                                        summary="fuzz"), granted_by="fuzz", granted_at=0.0)
                    await client.create_instance(offer_id=1, image="img", disk_gib=10, label="vastui-x-c1-1",
                                                 approval=approval)
            except VastuiError as exc:
                assert KEY not in assert_one_line(exc)
            except BaseException as exc:  # noqa: BLE001 - the point: nothing else may come out
                raise AssertionError(f"{call}: {type(exc).__name__} escaped: {str(exc)[:300]}") from exc
    finally:
        server.close()
        await server.wait_closed()
