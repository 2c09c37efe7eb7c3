package statemachine

// Result is what a proposer receives once its entry is applied: the
// response (*pb.PutResponse, *pb.TxnResponse, the member list of a conf
// change, ...) or the error the entry failed with.
type Result struct {
	Resp any
	Err  error
}

// Pending is the result of one applied proposal, by its request ID.
type Pending struct {
	ID     uint64
	Result Result
}

// Waiter receives the result of every applied proposal that carries a
// request ID, once the batch holding it is committed and visible to
// readers (the member's wait registry). Trigger must not block.
type Waiter interface {
	Trigger(id uint64, r Result)
}
