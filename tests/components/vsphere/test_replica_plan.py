"""Where template copies go and which copy each VM clones (components/vsphere/template_copies/plan.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from components.vsphere.template_copies.plan import ReplicaSite, assign, clones_per_source, copy_sources, derived_sites

HOSTS = [f"esxi-{i:03d}" for i in range(1, 513)]


@pytest.mark.parametrize(("linked", "expected"), [(True, 15), (False, 7)])
def test_one_source_serves_its_host_units_less_its_own_vm(linked: bool, expected: int) -> None:
    assert clones_per_source(linked=linked) == expected


@pytest.mark.parametrize("workers", [1, 4, 15])
def test_no_copies_while_the_template_serves_every_worker_in_one_wave(workers: int) -> None:
    assert derived_sites(HOSTS[:workers], datastore="ds", linked=True) == []


def test_512_linked_workers_get_a_copy_every_15_hosts_each_serving_15() -> None:
    sites = derived_sites(HOSTS, datastore="ds", linked=True)
    assert len(sites) == 35  # ceil(512 / 15)
    assert sites[:2] == [ReplicaSite("esxi-001", "ds"), ReplicaSite("esxi-016", "ds")]
    chosen = assign(dict(zip(HOSTS, HOSTS, strict=True)), datastore="ds", linked=True, sites=sites, host_order=HOSTS)
    load = Counter(chosen.values())
    assert max(load.values()) == 15
    # each worker clones the copy on its own host, else the last one before it
    assert chosen["esxi-001"] == sites[0]
    assert chosen["esxi-015"] == sites[0]
    assert chosen["esxi-016"] == sites[1]


def test_several_workers_on_one_host_stay_in_one_group() -> None:
    hosts = ["a"] * 10 + ["b"] * 10
    assert derived_sites(hosts, datastore="ds", linked=True) == [ReplicaSite("a", "ds"), ReplicaSite("b", "ds")]


def test_a_linked_clone_never_takes_a_copy_on_another_datastore() -> None:
    sites = [ReplicaSite("esxi-002", "other")]
    chosen = assign({"w1": "esxi-002"}, datastore="ds", linked=True, sites=sites, host_order=HOSTS)
    assert chosen == {"w1": None}
    full = assign({"w1": "esxi-002"}, datastore="ds", linked=False, sites=sites, host_order=HOSTS)
    assert full == {"w1": sites[0]}


def test_hosts_before_the_first_copy_wrap_round_to_the_last() -> None:
    sites = [ReplicaSite("esxi-003", "ds"), ReplicaSite("esxi-005", "ds")]
    chosen = assign({"w1": "esxi-001", "w4": "esxi-004"}, datastore="ds", linked=True, sites=sites, host_order=HOSTS)
    assert chosen == {"w1": sites[1], "w4": sites[0]}


def test_a_vm_without_host_keeps_its_copy_when_another_is_added() -> None:
    sites = [ReplicaSite(f"esxi-{i:03d}", "ds") for i in range(1, 5)]
    names = {f"cp-{i}": None for i in range(40)}
    before = assign(names, datastore="ds", linked=True, sites=sites, host_order=HOSTS)
    after = assign(names, datastore="ds", linked=True, sites=[*sites, ReplicaSite("esxi-009", "ds")], host_order=HOSTS)
    moved = [n for n in names if before[n] != after[n]]
    assert all(after[n] == ReplicaSite("esxi-009", "ds") for n in moved)
    assert len(moved) < len(names) // 2


def test_copies_fan_out_as_a_tree_so_the_template_host_makes_seven() -> None:
    """512 workers: the template's host made all 35 copies, 8 at a time, and the control plane's
    clone queued behind them (BENCHMARKS.md, 7m53s for a 6m14s bound)."""
    sites = derived_sites(HOSTS, datastore="ds", linked=True)
    sources = copy_sources(sites, linked=True)
    from_template = [site for site in sites if sources[site.key] is None]
    assert from_template == sites[:7]
    # The rest clone a copy of the level before (one of the first 7), four each, round robin.
    children = Counter(source.key for source in sources.values() if source is not None)
    assert set(children) == {site.key for site in sites[:7]} and set(children.values()) == {4}
    assert sources[sites[7].key] == sites[0] and sources[sites[8].key] == sites[1]


def test_a_copy_tree_keeps_every_source_as_the_stack_grows() -> None:
    """A new copy comes last: the copies before it keep their source (a new source replaces a copy)."""
    sites = derived_sites(HOSTS, datastore="ds", linked=True)
    before = copy_sources(sites[:20], linked=True)
    after = copy_sources(sites, linked=True)
    assert {key: after[key] for key in before} == before


@pytest.mark.parametrize("count", [1, 7])
def test_up_to_seven_copies_all_clone_the_template(count: int) -> None:
    sites = [ReplicaSite(f"h{i}", "ds") for i in range(count)]
    assert set(copy_sources(sites, linked=True).values()) == {None}


def test_a_linked_copy_clones_only_a_copy_on_its_own_datastore() -> None:
    sites = [ReplicaSite(f"h{i}", "other" if i < 7 else "ds") for i in range(9)]
    sources = copy_sources(sites, linked=True)
    assert sources["h7-ds"] is None and sources["h8-ds"] is None


def test_full_copies_all_clone_the_template() -> None:
    """A level of full copies would add a full clone (8 minutes) to the path of every worker below it."""
    sites = [ReplicaSite(f"h{i}", "ds") for i in range(74)]
    assert set(copy_sources(sites, linked=False).values()) == {None}
