"""A workaround for a Streamlit (1.67) bug the dashboard runs into, applied once per server process.

**Replies to the browser dropped by a rerun.** A file dropped on ``st.file_uploader`` first asks the
server for upload URLs (a ``FileURLsRequest`` on the websocket); the reply (``file_urls_response``)
waits in the session's message queue until the server's next flush. A script run that starts in
between clears that queue (``ForwardMsgQueue.clear(retain_lifecycle_msgs=True)`` on
``SCRIPT_STARTED``) and keeps only lifecycle messages, so the reply is lost and the browser waits
for it for good: the files never upload, no file chip, no rerun, no error anywhere. It happens when
files are dropped while a rerun is being started, e.g. right after removing the previous files (each
removal reruns the script), and more often on a loaded server, whose flush comes later
(``docs/decisions/browser-tests.md``, "Uploads lost to a rerun"). :func:`keep_replies_across_reruns` makes that clear
keep the replies to the browser's requests too: keeping one is what an earlier flush would have done,
and a reply is not output of the interrupted run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from streamlit.runtime.forward_msg_queue import ForwardMsgQueue

REPLIES = frozenset({"file_urls_response", "backend_operation_response", "heartbeat_ack"})  # answers to a request


def _clear_keeping_replies(clear: Callable[..., None]) -> Callable[..., None]:
    """``ForwardMsgQueue.clear`` that keeps, when it keeps lifecycle messages, the queued replies too."""

    @functools.wraps(clear)
    def wrapped(
        self: ForwardMsgQueue, retain_lifecycle_msgs: bool = False, fragment_ids_this_run: list[str] | None = None
    ) -> None:
        replies = [m for m in self._queue if m.WhichOneof("type") in REPLIES] if retain_lifecycle_msgs else []
        clear(self, retain_lifecycle_msgs, fragment_ids_this_run)
        self._queue.extend(m for m in replies if all(m is not kept for kept in self._queue))

    wrapped.keeps_replies = True  # type: ignore[attr-defined]
    return wrapped


def keep_replies_across_reruns() -> bool:
    """Make a rerun's queue clear keep the replies to the browser's requests (see the module docstring);
    idempotent. Returns whether the patch is in place (False: this Streamlit has no such method)."""
    clear = getattr(ForwardMsgQueue, "clear", None)
    if clear is None:
        return False
    if not getattr(clear, "keeps_replies", False):
        ForwardMsgQueue.clear = _clear_keeping_replies(clear)
    return True


__all__ = ["REPLIES", "keep_replies_across_reruns"]
