"""The donation model: fresh donated arguments before every call, the check that XLA took
them, and the copies it still made, on programs whose answers are known exactly."""

from __future__ import annotations

import importlib.util
import warnings
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from scanbench.api import Backend, InputError, Strategy
from scanbench.cells import Cell
from scanbench.donation import Donated, DonationError
from scanbench.execution.worker import run_cell
from scanbench.gate.interleave import ServedCell, Side
from scanbench.gate.rules import BaselineRule
from scanbench.probes.aliasing import aliases, donation_facts
from scanbench.sampling import TimingConfig
from tests.support.paths import REPO_ROOT, SCENARIO_FILES

ROOT = REPO_ROOT
DONATES = str(SCENARIO_FILES / "donates.py")
_spec = importlib.util.spec_from_file_location("donates_for_tests", DONATES)
donates = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(donates)
QUICK = TimingConfig(warmup=1, min_time_s=0.0, min_count=5, max_count=5)


def _text(fn, donate=(0,), x=None):
    x = jnp.arange(8.0) if x is None else x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jax.jit(fn, donate_argnums=donate).lower(x).compile().as_text()


def test_each_call_gets_a_fresh_copy_and_the_last_one_must_be_gone():
    double = jax.jit(lambda x: 2 * x, donate_argnums=0)
    pristine = jnp.arange(4.0)
    held = Donated((pristine,), (0,), "double")
    for _ in range(3):
        held.refresh()
        (given,) = held.call_args()
        assert given is not pristine
        np.testing.assert_array_equal(double(given), 2 * np.arange(4.0))
        assert given.is_deleted()
    held.refresh()
    assert held.calls == 3 and not pristine.is_deleted()


def test_the_fresh_copy_is_waited_for_before_the_timed_call():
    """A copy is queued like any JAX call: refresh waits for the copies it hands out, so
    the next (timed) call does not wait for them inside its timed region."""
    from scanbench import donation

    waited = []

    def ready(value):
        waited.append(value)
        return jax.block_until_ready(value)

    with mock.patch.object(donation, "_ready", ready):
        held = Donated((jnp.zeros(1 << 20),), (0,), "big")
        held.refresh()
    assert len(waited) == 2
    assert waited[-1][0] is held.call_args()[0]


def test_a_buffer_the_call_kept_fails_with_the_argument_named():
    held = Donated((jnp.arange(4.0), jnp.zeros(4)), (1,), "keeps")
    jax.jit(lambda x, y: x + y)(*held.call_args())  # no donation: the buffer survives
    with pytest.raises(DonationError, match=r"'keeps': argument 1 is declared donated"):
        held.refresh()


def test_refresh_without_a_call_in_between_checks_nothing():
    held = Donated((jnp.arange(4.0),), (0,), "idle")
    held.refresh()
    held.refresh()
    assert held.calls == 0


@pytest.mark.parametrize(("donate", "message"), [((2,), "not a position"), ((0,), "no JAX array")])
def test_bad_donated_positions_are_refused(donate, message):
    with pytest.raises(InputError, match=message):
        Donated((np.arange(3.0), jnp.zeros(3)), donate, "bad")


def test_a_declared_donation_needs_a_setup():
    with pytest.raises(InputError, match=r"donate=\(1,\) needs a setup"):
        Backend("b", Strategy.SCANNED, "jax", lambda i, s: i, lambda p: p, donate=(1,))


@pytest.mark.parametrize(
    ("fn", "donate", "aliased", "copies"),
    [
        (lambda x: x.at[0].set(1.0), (0,), (((), 0),), 0),  # in place
        (lambda x: x[::-1], (0,), (((), 0),), 1),  # read while written: a copy
        (lambda x: (x.at[0].set(1.0), x), (0,), (((0,), 0),), 1),  # the original kept too
        (lambda x: x.sum(), (0,), (), 0),  # no output of its shape: not usable
        (lambda x: x.at[0].set(1.0), (), (), 0),  # nothing donated
        (  # a loop carry started from the donated buffer: updated in place
            lambda x: jax.lax.fori_loop(0, 3, lambda i, o: o.at[i].set(1.0 * i), x),
            (0,),
            (((), 0),),
            0,
        ),
    ],
)
def test_copies_despite_donation_on_programs_of_known_answer(fn, donate, aliased, copies):
    text = _text(fn, donate)
    facts = donation_facts(text)
    assert aliases(text) == aliased
    assert (facts.donated, facts.copies) == (len(aliased), copies)


def _cell(backend: str) -> object:
    cell = Cell("donates", backend, "smoke", "float32", 0, f"{DONATES}:SCENARIO")
    with mock.patch("scanbench.execution.worker.scenario_of", return_value=donates.SCENARIO):
        return run_cell(cell, QUICK, True)


@pytest.mark.parametrize(("backend", "copies"), [("donated", 0), ("reversed-read", 1)])
def test_a_donating_cell_is_checked_timed_and_counted(backend, copies):
    record = _cell(backend)
    assert record.status == "ok", record.error
    assert len(record.samples_s) == 5
    per_call = record.counts.per_call()
    assert (per_call["donated"], per_call["donation_copies"]) == (1, copies)


def test_a_plain_cell_donates_nothing():
    per_call = _cell("plain").counts.per_call()
    assert (per_call["donated"], per_call["donation_copies"]) == (0, 0)


@pytest.mark.parametrize(
    ("backend", "message"),
    [
        ("not-taken", "DonationError: backend 'not-taken': argument 1 is declared donated"),
        ("undeclared", "declares donate=(), but its executable was compiled with"),
    ],
)
def test_a_donation_that_did_not_happen_fails_the_cell(backend, message):
    record = _cell(backend)
    assert record.status == "failed"
    assert message in record.error
    assert not record.samples_s


def test_the_gate_worker_hands_each_call_a_fresh_buffer():
    rule = BaselineRule(f"{DONATES}:SCENARIO", "donated", "smoke", delta=0.1, floor_s=0.0)
    with ServedCell(rule, Side(ROOT), 120) as served:
        assert len(served.samples(4)) == 4


def test_the_notebook_api_donates_checks_and_counts():
    from scanbench import compare

    x, out = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    into = jax.jit(lambda x, o: o.at[:].set(2 * x), donate_argnums=1)
    plain = jax.jit(lambda x, o: 2 * x)
    functions = {"scan-plain": plain, "scan-into": into}
    table = compare(functions, x, out, donate={"scan-into": 1}, timing=QUICK)
    records = {record.backend: record for record in table.attrs["run"].records}
    assert all(record.status == "ok" for record in records.values())
    assert records["scan-into"].counts.per_call()["donated"] == 1
    assert records["scan-plain"].counts.per_call()["donated"] == 0
    (undeclared,) = compare({"scan-into": into}, x, out, timing=QUICK).attrs["run"].records
    assert undeclared.status == "failed" and "declares donate=()" in undeclared.error
    with pytest.raises(InputError, match=r"donate\['scan-into'\] = \(2,\): positions must"):
        compare({"scan-into": into}, x, out, donate=(2,), timing=QUICK)
