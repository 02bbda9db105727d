"""The Streamlit workaround (pages/common/upstream.py): a rerun's queue clear keeps the replies to the browser's
requests, so a file dropped while a rerun starts still gets its upload URLs (tests/e2e/test_e2e_deploy.py lost one
without it: the upload never started and its alert never came)."""

from __future__ import annotations

from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.runtime.forward_msg_queue import ForwardMsgQueue

from pages.common.upstream import keep_replies_across_reruns


def _message(kind: str) -> ForwardMsg:
    msg = ForwardMsg()
    if kind == "new_session":
        msg.new_session.name = "app"
    elif kind == "delta":
        msg.delta.new_element.markdown.body = "output of the interrupted run"
        msg.metadata.delta_path[:] = [0, 0]
    elif kind == "file_urls_response":
        msg.file_urls_response.response_id = "request-1"
        msg.file_urls_response.file_urls.add(file_id="f1", upload_url="/u/f1", delete_url="/d/f1")
    elif kind == "backend_operation_response":
        msg.backend_operation_response.request_id = "request-2"
    return msg


def _queue(*kinds: str) -> ForwardMsgQueue:
    queue = ForwardMsgQueue()
    for kind in kinds:
        queue.enqueue(_message(kind))
    return queue


def _kinds(messages: list[ForwardMsg]) -> list[str]:
    return [m.WhichOneof("type") for m in messages]


KINDS = ("new_session", "delta", "file_urls_response", "delta", "backend_operation_response")


def test_streamlit_itself_drops_the_reply_an_upload_waits_for() -> None:
    """The upstream bug, on Streamlit's own method: once this fails, Streamlit keeps replies itself and
    pages/common/upstream.py can go."""
    keep_replies_across_reruns()
    queue = _queue(*KINDS)
    ForwardMsgQueue.clear.__wrapped__(queue, retain_lifecycle_msgs=True)
    assert _kinds(queue.flush()) == ["new_session"]


def test_a_rerun_keeps_the_replies_and_drops_the_old_runs_output() -> None:
    assert keep_replies_across_reruns()
    queue = _queue(*KINDS)
    queue.clear(retain_lifecycle_msgs=True)  # what AppSession does when a script run starts
    kept = queue.flush()
    assert _kinds(kept) == ["new_session", "file_urls_response", "backend_operation_response"]
    urls = kept[1].file_urls_response
    assert (urls.response_id, urls.file_urls[0].file_id, urls.file_urls[0].upload_url) == ("request-1", "f1", "/u/f1")
    assert queue.is_empty()  # flush still empties the queue


def test_a_plain_clear_and_a_flush_still_drop_everything() -> None:
    keep_replies_across_reruns()
    queue = _queue(*KINDS)
    queue.clear()
    assert queue.is_empty()
    queue = _queue(*KINDS)
    flushed = ["new_session", "delta", "file_urls_response", "backend_operation_response"]  # one delta path: composed
    assert _kinds(queue.flush()) == flushed
    assert queue.is_empty()


def test_a_fragment_rerun_keeps_each_reply_once_and_deltas_compose_after_a_clear() -> None:
    keep_replies_across_reruns()
    queue = _queue(*KINDS)
    queue.clear(retain_lifecycle_msgs=True, fragment_ids_this_run=["fragment"])  # Streamlit keeps non-deltas here
    assert _kinds(queue.flush()).count("file_urls_response") == 1
    queue = _queue("file_urls_response", "delta")
    queue.clear(retain_lifecycle_msgs=True)
    queue.enqueue(_message("delta"))
    queue.enqueue(_message("delta"))  # same delta path: composed into one (the index map is right after the clear)
    assert _kinds(queue.flush()) == ["file_urls_response", "delta"]


def test_the_patch_is_applied_once() -> None:
    assert keep_replies_across_reruns() and keep_replies_across_reruns()
    assert not getattr(ForwardMsgQueue.clear.__wrapped__, "keeps_replies", False)  # not wrapped twice
