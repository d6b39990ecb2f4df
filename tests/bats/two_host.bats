#!/usr/bin/env bats
# Every pair across two machines: two Soft-RoCE VMs on a virtual network, descriptors crossing through a
# shared folder (the copy you would make with scp).

load test_helper/common
load test_helper/two_host

setup() {
    setup_two_hosts
}

@test "two hosts: rdma_write crosses the network" {
    on_host_a "$(prog rdma_write_responder)" $(responder_on_a)
    on_host_b "$(prog rdma_write_requester)" $(requester_on_b) -w "written across the wire"
    assert_success
    assert_line --partial "GID index 1 (::ffff:10.77.0.2)"
    assert_line --partial "responder: QPN"
    assert_line 'Requester has written: "written across the wire"'
    assert_equal "$peer_status" 0
    run echo "$peer_output"
    assert_line --partial "GID index 1 (::ffff:10.77.0.1)"
    assert_line --partial "requester: QPN 0x"
    assert_line 'Responder memory now holds: "written across the wire"'
    assert_line --index -1 "Sample finished successfully"
}
