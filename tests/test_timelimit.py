"""helpers.timelimit: code that runs too long is stopped inside, and the exception says which line was running."""

import re
import signal
import threading
import time

import pytest

from helpers import timelimit
from helpers.timelimit import TimeLimitExceeded, time_limit


def endless():
    n = 0
    while True:          # the line the report names
        n += 1


def stubborn():
    try:
        endless()
    except BaseException:       # swallows the first stop: the next one, a second later, is outside this try
        pass
    endless()


def test_an_endless_loop_is_stopped_and_its_line_named():
    t0 = time.monotonic()
    with pytest.raises(TimeLimitExceeded) as info, time_limit(0.3):
        endless()
    assert time.monotonic() - t0 < 5
    assert info.value.seconds == 0.3
    assert re.fullmatch(r"your code was running endless, line \d+ of test_timelimit\.py: "
                        r"`(while True: +# the line the report names|n \+= 1)`", info.value.where), info.value.where


def test_a_loop_that_swallows_the_exception_is_stopped_again():
    t0 = time.monotonic()
    with pytest.raises(TimeLimitExceeded), time_limit(0.2):
        stubborn()
    assert time.monotonic() - t0 < 5


def test_the_previous_handler_and_timer_come_back():
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        with time_limit(5):
            time.sleep(0.01)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 20 < left <= 30                     # the outer timer runs on, less the time spent
        assert signal.getsignal(signal.SIGALRM) is not None and not fired
        signal.setitimer(signal.ITIMER_REAL, 0)
        with pytest.raises(TimeLimitExceeded), time_limit(0.1):   # nothing left of an expired limit afterwards
            time.sleep(5)
        time.sleep(1.2)                            # a repeat would have come by now
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not fired


def test_a_sooner_outer_limit_governs():
    with pytest.raises(TimeLimitExceeded) as info, time_limit(0.2):
        with time_limit(60):
            endless()
    assert info.value.seconds == 0.2


def test_outside_the_main_thread_a_watchdog_stops_it():
    out = {}

    def run():
        try:
            with time_limit(0.3):
                endless()
        except TimeLimitExceeded as exc:
            out["where"] = exc.where

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(10)
    assert not worker.is_alive() and "endless" in out["where"], out


def test_threads_it_started_that_run_own_code_are_stopped_too():
    started = []

    def spin():
        started.append(threading.current_thread())
        endless()

    with pytest.raises(TimeLimitExceeded) as info, time_limit(0.3):
        threading.Thread(target=spin, daemon=True).start()
        while True:
            time.sleep(0.01)           # the caller waits, as strategy.run waits for its replica threads
    started[0].join(5)
    assert not started[0].is_alive()
    assert "endless" in info.value.where, info.value.where    # the loop, not the caller's wait


def test_a_check_stuck_in_a_library_names_the_checkers_line():
    def checker():
        time.sleep(30)                 # stands for a library call the checker makes

    with pytest.raises(TimeLimitExceeded) as info, time_limit(0.2):
        checker()
    assert info.value.where.startswith("your code was running checker"), info.value.where   # a test's code is "own"
    assert timelimit.is_own_code(__file__) and not timelimit.is_own_code(timelimit.__file__)
    assert not timelimit.is_own_code(threading.__file__) and not timelimit.is_own_code("<frozen os>")
    assert timelimit.is_own_code("/tmp/ipykernel_123/456.py")


def test_bad_limits_are_refused():
    for bad in (0, -1, "5", True):
        with pytest.raises(ValueError, match="seconds"), time_limit(bad):
            pass
