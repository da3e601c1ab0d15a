"""The mailbox the bridge and the task runner hand things to the GUI thread through: order kept across
threads, one wake-up however many posts wait, a nested collect going on in order, nothing after close."""

from __future__ import annotations

import threading

from ember_chat.app.engine_link.gui_mailbox import GuiMailbox


def drain(mailbox: GuiMailbox[tuple[int, int]]) -> list[tuple[int, int]]:
    out = mailbox.collect()
    items = list(out)
    out.clear()
    return items


def test_what_threads_post_is_collected_in_the_order_posted() -> None:
    mailbox: GuiMailbox[tuple[int, int]] = GuiMailbox()
    per_thread = 2_000
    go = threading.Barrier(4)

    def worker(tid: int) -> None:
        go.wait()
        for i in range(per_thread):
            mailbox.post((tid, i))

    threads = [threading.Thread(target=worker, args=(tid,)) for tid in range(4)]
    for t in threads:
        t.start()
    collected: list[tuple[int, int]] = []
    while any(t.is_alive() for t in threads):
        collected += drain(mailbox)  # (collected while they post, too)
    for t in threads:
        t.join()
    collected += drain(mailbox)

    assert len(collected) == 4 * per_thread
    for tid in range(4):
        assert [i for t, i in collected if t == tid] == list(range(per_thread))


def test_a_post_made_after_another_threads_post_comes_after_it() -> None:
    mailbox: GuiMailbox[tuple[int, int]] = GuiMailbox()
    posted = threading.Event()

    def first() -> None:
        mailbox.post((1, 0))
        posted.set()

    def second() -> None:
        posted.wait()
        mailbox.post((2, 0))

    threads = [threading.Thread(target=second), threading.Thread(target=first)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert drain(mailbox) == [(1, 0), (2, 0)]


def test_one_wake_up_however_many_posts_wait_and_the_next_post_after_a_collect_wakes_again() -> None:
    wakes: list[str] = []
    mailbox: GuiMailbox[tuple[int, int]] = GuiMailbox(lambda: wakes.append(threading.current_thread().name))
    for i in range(5):
        mailbox.post((0, i))
    assert len(wakes) == 1
    assert wakes == [threading.current_thread().name]  # (on the posting thread: the wake only queues)
    assert drain(mailbox) == [(0, i) for i in range(5)]
    mailbox.post((0, 5))
    assert len(wakes) == 2


def test_a_post_that_is_not_urgent_wakes_at_most_every_interval() -> None:
    wakes: list[int] = []
    mailbox: GuiMailbox[tuple[int, int]] = GuiMailbox(lambda: wakes.append(1), interval=60.0)
    mailbox.post((0, 0))  # urgent: wakes
    drain(mailbox)
    mailbox.post((0, 1), urgent=False)  # within the interval: waits for the owner's timer
    assert len(wakes) == 1
    mailbox.post((0, 2))  # an urgent one wakes now, and the waiting one goes with it
    assert len(wakes) == 2
    assert drain(mailbox) == [(0, 1), (0, 2)]

    mailbox.interval = 0.0
    mailbox.post((0, 3), urgent=False)
    assert len(wakes) == 3


def test_a_nested_collect_goes_on_where_the_outer_one_was() -> None:
    mailbox: GuiMailbox[tuple[int, int]] = GuiMailbox()
    handed: list[tuple[int, int]] = []
    mailbox.post((0, 0))
    mailbox.post((0, 1))
    outer = mailbox.collect()
    handed.append(outer.popleft())
    mailbox.post((0, 2))  # (posted while the GUI thread hands (0, 0) on and runs an event loop)
    inner = mailbox.collect()
    while inner:
        handed.append(inner.popleft())
    while outer:  # (the outer call finds nothing left: the inner one handed it on, in order)
        handed.append(outer.popleft())
    assert handed == [(0, 0), (0, 1), (0, 2)]


def test_after_close_posts_are_dropped_and_wake_nothing() -> None:
    wakes: list[int] = []
    mailbox: GuiMailbox[tuple[int, int]] = GuiMailbox(lambda: wakes.append(1))
    mailbox.post((0, 0))
    mailbox.close()
    mailbox.post((0, 1))
    assert len(wakes) == 1
    assert drain(mailbox) == [(0, 0)]  # what came before is still collected
    mailbox.post((0, 2))
    assert wakes == [1]
    assert drain(mailbox) == []
