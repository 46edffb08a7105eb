from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from quietcore.facts.cmdline import parse_cmdline


def test_quotes_group_spaces_and_are_removed() -> None:
    cmd = parse_cmdline('ro "dyndbg=file drivers/net/* +p" isolcpus=managed_irq,domain,2-3 quiet\n')
    assert cmd.get("dyndbg") == "file drivers/net/* +p"
    assert cmd.get("isolcpus") == "managed_irq,domain,2-3"
    assert cmd.has("quiet") and cmd.get("quiet") == ""
    assert cmd.get("absent") is None


def test_quoted_value_after_equals() -> None:
    assert parse_cmdline('acpi_osi="Windows 2020" x=1').get("acpi_osi") == "Windows 2020"


def test_arguments_after_double_dash_belong_to_init() -> None:
    cmd = parse_cmdline("quiet -- --firecracker-init nohz_full=1")
    assert cmd.has("quiet")
    assert not cmd.has("nohz_full")


def test_later_value_wins() -> None:
    assert parse_cmdline("preempt=none preempt=full").get("preempt") == "full"


@given(
    st.dictionaries(
        st.from_regex(r"[a-z_.]{1,12}", fullmatch=True), st.from_regex(r"[a-z0-9,\- ]{0,20}", fullmatch=True)
    )
)
def test_quoted_values_survive(params: dict[str, str]) -> None:
    line = " ".join(f'{k}="{v}"' for k, v in params.items())
    cmd = parse_cmdline(line)
    for key, value in params.items():
        assert cmd.get(key) == value
