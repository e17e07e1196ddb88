"""The SIGTERM/SIGINT handler of a training run: a signal that comes while the handler is being put in
place, or taken away, is never lost."""

import signal
import threading
import time

import pytest

from trainer.training import preemption
from trainer.training.preemption import PreemptionHandler


def _wait_for(predicate, secs=5.0):
    end = time.time() + secs
    while time.time() < end and not predicate():
        time.sleep(0.01)
    return predicate()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_handler_is_installed_reaches_it(monkeypatch, sig):
    """The signal lands inside __enter__, after the Python handler changed and before the wakeup pipe
    is in place (where a Ctrl-C was lost, and the run trained on)."""
    real = preemption.signal.set_wakeup_fd

    def set_wakeup_fd(fd, **kwargs):
        signal.pthread_kill(threading.main_thread().ident, sig)  # as a Ctrl-C reaches the main thread
        return real(fd, **kwargs)

    monkeypatch.setattr(preemption.signal, "set_wakeup_fd", set_wakeup_fd)
    before = signal.getsignal(signal.SIGINT)
    handler = PreemptionHandler(grace_secs=60)
    with handler:
        monkeypatch.setattr(preemption.signal, "set_wakeup_fd", real)
        assert _wait_for(lambda: handler.signum == sig)
        handler.acknowledge()
    assert signal.getsignal(signal.SIGINT) is before


def test_a_signal_while_the_handler_is_taken_away_goes_to_the_previous_one(monkeypatch):
    """SIGINT inside __exit__: the handler before the run gets it (a KeyboardInterrupt), not a no-op."""
    before = signal.getsignal(signal.SIGINT)
    handler = PreemptionHandler(grace_secs=60)
    handler.__enter__()
    real = preemption.signal.set_wakeup_fd

    def set_wakeup_fd(fd, **kwargs):
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        return real(fd, **kwargs)

    monkeypatch.setattr(preemption.signal, "set_wakeup_fd", set_wakeup_fd)
    with pytest.raises(KeyboardInterrupt):
        handler.__exit__(None, None, None)
        time.sleep(1)  # the interrupt is raised at the next bytecode of the main thread, at the latest here
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_ctrl_c_python_dropped_still_ends_the_run_before_training():
    """The command's Ctrl-C after its start-up hold: raised inside a finalizer, Python drops the
    KeyboardInterrupt and goes on ("Exception ignored in ..."); the training run's handler, installed
    next, raises it rather than train on."""
    from trainer import interrupts

    class Finalized:
        def __del__(self):
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            time.sleep(0.2)  # the handler runs in here: its KeyboardInterrupt is dropped

    interrupts.hold_ctrl_c()
    interrupts.release_ctrl_c()
    try:
        assert not interrupts.ctrl_c_pressed()
        finalized = Finalized()
        del finalized
        assert interrupts.ctrl_c_pressed()
        with pytest.raises(KeyboardInterrupt):
            with PreemptionHandler(grace_secs=60):
                pytest.fail("training began after the Ctrl-C")
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        interrupts._pressed.clear()
    assert not preemption._installed
