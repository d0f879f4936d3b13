"""`execute.background`: a request on a thread beside work on the caller's thread."""
import threading
import time

import pytest

from shlo_env.execute.background import BackgroundRequest, run_beside


def test_the_request_runs_on_another_thread_and_its_value_comes_back():
    where = []
    request = BackgroundRequest(lambda: where.append(threading.current_thread()) or 7, "test-request")
    assert request.result() == 7
    assert where and where[0] is not threading.main_thread()
    assert request.ended <= time.perf_counter()


def test_the_requests_error_is_raised_on_the_callers_thread():
    request = BackgroundRequest(lambda: 1 / 0, "test-request")
    with pytest.raises(ZeroDivisionError):
        request.result()
    assert request.ended > 0.0  # its end is known on failure too


def test_run_beside_gives_the_seconds_the_work_ran_past_the_request():
    request, past = run_beside(lambda: "done", lambda: time.sleep(0.5), "test-request")
    assert request.result() == "done" and 0.3 < past < 2.0
    request, past = run_beside(lambda: time.sleep(0.5), lambda: None, "test-request")
    assert past == 0.0  # the work ended first: nothing waited on it


def test_run_beside_waits_for_the_request_when_the_work_fails():
    done = []
    with pytest.raises(KeyError):
        run_beside(lambda: time.sleep(0.3) or done.append(1), lambda: {}["x"], "test-request")
    assert done == [1]  # joined before the work's error left: no request left running
