package contract

// Argument and result types of the vault primitives (docs/HOSTCALLS.md,
// docs/SECRETS.md "Vault primitives"). Values are opaque blobs: a value
// enters only as a secret input blob, only vault.set consumes it, and no
// result carries plaintext, ciphertext, nonces, salts, digests or tags.
//
// A module keeps records in the vault beside the values: small opaque
// strings under keys of its own (one namespace per module family), sealed
// like everything else in the vault file. vault.set writes its record in
// the same fsync'd transaction as the value, so a record exists exactly
// when its put happened (no crash ordering can separate them). The
// secrets module keeps its operation receipts there.
type (
	// VaultSetArgs are the args of vault.set: seal the bytes of input blob
	// ValueBlob and put them under Name at the name's next revision.
	//
	// With Record: the record is written in the same transaction. Its key
	// is written once. If the key already exists the call is a replay and
	// writes nothing: it succeeds (Written false) only if the existing
	// record has the same Value, was written by a put of the same Name,
	// that put's revision is still the name's current, unexpired one and
	// the stored value equals the blob; otherwise CONFLICT
	// secret_operation_conflict. A new record on a name that already holds
	// MaxPerName records is CONFLICT secret_receipt_capacity, before
	// anything is written.
	VaultSetArgs struct {
		Name      string       `json:"name" doc:"stored form: 1 to 256 bytes of UTF-8, no NUL, no surrounding white space"`
		ValueBlob *uint32      `json:"valueBlob" doc:"id of a secret input blob of at most 1 MiB"`
		Record    *VaultRecord `json:"record,omitempty" doc:"a record of the module written in the same transaction"`
	}
	// VaultRecord is a module's record written by vault.set.
	VaultRecord struct {
		Key        string `json:"key" doc:"1 to 512 bytes of UTF-8 without NUL"`
		Value      string `json:"value" doc:"at most 1024 bytes, opaque to the host"`
		MaxPerName int    `json:"maxPerName,omitempty" doc:"a new record is refused when the name holds this many (1 to 1024; 0: 1024)"`
	}
	// VaultSetResult is the result of vault.set.
	VaultSetResult struct {
		Revision uint64 `json:"revision" doc:"the name's revision holding the value (above 0)"`
		Written  bool   `json:"written" doc:"false: a replay of an existing record; nothing was written"`
	}
	// VaultDeleteArgs are the args of vault.delete.
	VaultDeleteArgs struct {
		Name string `json:"name" doc:"stored form, as in vault.set"`
	}
	// VaultDeleteResult is the result of vault.delete: Deleted is false
	// when the name held no value (nothing was written).
	VaultDeleteResult struct {
		Deleted bool `json:"deleted"`
	}
	// VaultReceiptArgs are the args of vault.receipt: the key of one of
	// the calling module's records.
	VaultReceiptArgs struct {
		Key string `json:"key" doc:"1 to 512 bytes of UTF-8 without NUL"`
	}
	// VaultReceiptResult is the result of vault.receipt: the record and
	// the raw state of the name its put wrote. Not Found: every other
	// field is zero. The put's binding still holds while Live and
	// Revision == CurrentRevision.
	VaultReceiptResult struct {
		Found           bool   `json:"found"`
		Value           string `json:"value" doc:"the record's value"`
		Name            string `json:"name" doc:"the name the record's put wrote"`
		Revision        uint64 `json:"revision" doc:"the revision the record's put wrote"`
		CurrentRevision uint64 `json:"currentRevision" doc:"the name's current revision; every value write increments it"`
		Live            bool   `json:"live" doc:"the name holds a current, unexpired value"`
		WrittenAtMs     int64  `json:"writtenAtMs" doc:"Unix ms of the put"`
	}

	// VaultListArgs are the args of vault.list.
	VaultListArgs struct {
		Limit int `json:"limit" doc:"the most names to return: 1 to 1000"`
	}
	// VaultListResult is the result of vault.list: the first Limit names
	// holding a current, unexpired value, sorted bytewise (Go string
	// order); metadata a deleted name keeps for its records is never
	// listed. More is true when more names hold a value.
	VaultListResult struct {
		Names []string `json:"names" doc:"stored names, sorted bytewise, at most limit; never null"`
		More  bool     `json:"more" doc:"more names than limit hold a value"`
	}
)

// VaultListMaxLimit is the largest limit vault.list takes.
const VaultListMaxLimit = 1000

// The vault host calls, all under capability "secrets".
var (
	VaultSet     = Call[VaultSetArgs, VaultSetResult]{"vault.set"}
	VaultList    = Call[VaultListArgs, VaultListResult]{"vault.list"}
	VaultDelete  = Call[VaultDeleteArgs, VaultDeleteResult]{"vault.delete"}
	VaultReceipt = Call[VaultReceiptArgs, VaultReceiptResult]{"vault.receipt"}
)

func vaultSpecs() []Spec {
	return []Spec{
		spec(VaultSet, "Seal and put: encrypts the secret input blob and stores it under name at its next revision; with record, writes the module's record in the same fsync'd transaction (a replay of an existing record writes nothing)."),
		spec(VaultList, "The first limit names holding a current, unexpired value, sorted bytewise, and whether more exist."),
		spec(VaultDelete, "Deletes the value of one name; the name's revision counter is kept while records refer to it."),
		spec(VaultReceipt, "Reads one of the module's records and the raw state of the name its put wrote."),
	}
}
