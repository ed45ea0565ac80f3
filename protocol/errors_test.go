package protocol

import "testing"

// AfterEffect turns any error into one that says the effect may have
// happened, keeping code, message and domain code, and leaves the
// original (often a shared value) unchanged.
func TestAfterEffect(t *testing.T) {
	shared := DomainError(CodeRateLimited, DomainRateLimited, "limit").WithRetry(true, false)
	got := AfterEffect(shared)
	if got.Code != CodeRateLimited || got.Message != "limit" || got.DomainCode() != DomainRateLimited {
		t.Fatalf("AfterEffect changed the error: %+v", got)
	}
	if *got.Details.RetrySafe || !*got.Details.MutationMayHaveApplied {
		t.Fatalf("after an effect: retrySafe %v, mutationMayHaveApplied %v", *got.Details.RetrySafe, *got.Details.MutationMayHaveApplied)
	}
	if !*shared.Details.RetrySafe || *shared.Details.MutationMayHaveApplied {
		t.Fatal("AfterEffect modified its argument")
	}
	bare := Errorf(CodeTimeout, "late")
	if e := AfterEffect(bare); e.Details == nil || !*e.Details.MutationMayHaveApplied || bare.Details != nil {
		t.Fatalf("bare error: %+v, original %+v", e, bare)
	}
	if AfterEffect(nil) != nil {
		t.Fatal("nil became an error")
	}
}

func TestInvokeOutcome(t *testing.T) {
	var none *InvokeOutcome
	none.MarkApplied() // a nil outcome records nothing
	if none.Applied() {
		t.Fatal("nil outcome applied")
	}
	o := &InvokeOutcome{}
	if o.Applied() {
		t.Fatal("fresh outcome applied")
	}
	o.MarkApplied()
	if !o.Applied() {
		t.Fatal("marked outcome not applied")
	}
}
