"""Building a simulation by hand (Simulation, Cluster, RDMC groups): plain mistakes are
TypeError/ValueError naming the argument and what was expected, not tracebacks from deep
inside."""
from __future__ import annotations

import pytest

from protocols.rdmc import Rdmc
from rnicsim.cluster import Cluster
from rnicsim.sim import Simulation


def test_simulation_seed_and_window_are_checked():
    """A non-integer seed and a negative measured window are refused by name."""
    with pytest.raises(TypeError, match="seed must be a whole number, got 'abc'"):
        Simulation(seed="abc")
    with pytest.raises(ValueError, match=r"measure: warmup_ns and window_ns must be >= 0"):
        Simulation(1).measure(-5, 100)
    with pytest.raises(ValueError, match=r"measure: warmup_ns and window_ns must be >= 0"):
        Simulation(1).measure(0, -1)


def test_cluster_arguments_are_checked(cx4):
    """A profile name instead of a Profile, counts that are not whole numbers, zero cores
    and failing a node that does not exist are refused by name."""
    with pytest.raises(TypeError, match=r"profile must be a Profile .*load_profile.*got str"):
        Cluster(Simulation(1), "cx4-edr", 2)
    with pytest.raises(TypeError, match="nodes must be a whole number, got '2'"):
        Cluster(Simulation(1), cx4, "2")
    with pytest.raises(ValueError, match="cores must be a whole number >= 1, got 0"):
        Cluster(Simulation(1), cx4, 2, cores=0)
    cl = Cluster(Simulation(1), cx4, 2)
    with pytest.raises(ValueError, match="fail_node: node must be a node index 0..1, got 9"):
        cl.fail_node(9)
    with pytest.raises(ValueError, match="reg_mr: length must be a whole number of bytes"):
        from rnicsim.verbs import Context
        Context(cl, 0).reg_mr(4096.0)


def test_cluster_topology_must_fit_its_nodes(cx4):
    """A leaf_spine with a leaf no node lands on, or more spines than NICs, is a ValueError
    naming the topology field and what fits (as a scenario's validation says)."""
    with pytest.raises(ValueError) as e:
        Cluster(Simulation(1), cx4, 80, topology={"kind": "leaf_spine", "leaves": 100,
                                                  "spines": 2})
    assert str(e.value) == ("topology.leaves: a leaf count whose leaves all get a node: 80 "
                            "nodes go 1 to a leaf in order and fill only 80 leaves (leaves: "
                            "80 fits), got 100")
    with pytest.raises(ValueError, match=r"^topology.spines: at most the NIC count \(4: "):
        Cluster(Simulation(1), cx4, 4, topology={"kind": "leaf_spine", "leaves": 2,
                                                 "spines": 5})


def test_rdmc_group_members_must_be_nodes_of_the_cluster(cx4):
    """A group member that is not a node of the cluster is a ValueError naming it."""
    sim = Simulation(1)
    r = Rdmc(Cluster(sim, cx4, 4))
    with pytest.raises(ValueError, match=r"members: node ids 0..3 of the cluster, got 9"):
        r.create_group([0, 9], 1 << 20, "chain")
