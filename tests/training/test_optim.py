"""rudder.training.optim: optimiser and schedule registries, and the config accepting exactly their
names."""

import pytest
import torch

from rudder.config import ConfigError, OptimConfig, from_dict
from rudder.training import optim


def parameters():
    return [torch.nn.Parameter(torch.ones(3))]


@pytest.mark.parametrize(
    ("name", "cls"),
    [("adam", torch.optim.Adam), ("adamw", torch.optim.AdamW), ("sgd", torch.optim.SGD)],
)
@pytest.mark.parametrize(
    ("implementation", "flags"),
    [("fused", {"fused": True}), ("foreach", {"foreach": True}), ("loop", {"foreach": False})],
)
def test_optimizers_are_built_by_name_and_implementation(name, cls, implementation, flags):
    opt = OptimConfig(
        name=name, lr=0.01, weight_decay=0.1, momentum=0.5, implementation=implementation
    )
    optimizer = optim.build_optimizer(parameters(), opt)
    assert type(optimizer) is cls
    group = optimizer.param_groups[0]
    assert group["lr"] == 0.01 and group["weight_decay"] == 0.1
    assert all(group[key] == value for key, value in flags.items())
    if name == "sgd":
        assert group["momentum"] == 0.5


def test_the_default_is_fused_adam():
    optimizer = optim.build_optimizer(parameters(), OptimConfig())
    assert type(optimizer) is torch.optim.Adam and optimizer.param_groups[0]["fused"] is True


def learning_rates(scheduler_name, epochs=4):
    opt = OptimConfig(
        lr=1.0, scheduler=scheduler_name, step_size=2, gamma=0.5, implementation="loop"
    )
    optimizer = optim.build_optimizer(parameters(), opt)
    scheduler = optim.build_scheduler(optimizer, opt, epochs)
    rates = []
    for _ in range(epochs):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates


def test_schedules():
    assert learning_rates("step") == [1.0, 1.0, 0.5, 0.5]  # gamma every step_size epochs
    assert learning_rates("none") == [1.0] * 4
    cosine = learning_rates("cosine")  # 0.5 (1 + cos(pi t / T)) over T = epochs
    assert cosine == pytest.approx([1.0, 0.8535534, 0.5, 0.1464466])


def test_unknown_names_list_the_registry():
    with pytest.raises(
        ConfigError,
        match=r"optim.name='lion' is not valid; expected one of \['adam', 'adamw', 'sgd'\]",
    ):
        optim.build_optimizer(parameters(), OptimConfig(name="lion"))
    with pytest.raises(
        ConfigError,
        match=r"optim.scheduler='linear' is not valid; expected one of "
        r"\['step', 'cosine', 'none'\]",
    ):
        from_dict({"optim": {"scheduler": "linear"}})


def test_a_registered_optimizer_is_a_valid_config_name(monkeypatch):
    monkeypatch.setitem(
        optim.OPTIMIZERS, "rprop", lambda params, opt, how: torch.optim.Rprop(params, lr=opt.lr)
    )
    config = from_dict({"optim": {"name": "rprop", "lr": 0.1}})
    assert type(optim.build_optimizer(parameters(), config.optim)) is torch.optim.Rprop
